package router

import (
	"bytes"
	"strings"
	"testing"

	"seckill-proxy/conf"
	"seckill-proxy/sale"
)

func TestNormaliseLua(t *testing.T) {
	same := []string{
		LegacyBuyScript,
		"-- a comment\n" + strings.ReplaceAll(LegacyBuyScript, "\n", "\n\t\t") + "\n\n",
		strings.ReplaceAll(LegacyBuyScript, " ", "   ") + " --[[ a block\ncomment ]]",
		strings.ReplaceAll(LegacyBuyScript, "\n", ";\n"),
	}
	want := normaliseLua(LegacyBuyScript)
	for _, body := range same {
		if got := normaliseLua(body); got != want {
			t.Errorf("normaliseLua(%q) = %q, want %q", body, got, want)
		}
	}
	if normaliseLua(`return "a  -- b"`) != `return "a  -- b"` {
		t.Error("normaliseLua changed a string literal")
	}
	if normaliseLua(strings.Replace(LegacyBuyScript, "< tonumber", "<= tonumber", 1)) == want {
		t.Error("a changed comparison normalises to the seeds' script")
	}
}

// FuzzLegacyBuy: whatever the arguments of an EVAL or EVALSHA, reading them as a legacy buy
// does not panic, and a buy it accepts has a valid SKU and uid and a quantity of at least 1.
func FuzzLegacyBuy(f *testing.F) {
	f.Add([]byte("EVAL\x00" + LegacyBuyScript + "\x002\x00seckill:stock:sku_1\x00seckill:buyers:sku_1\x00u1\x001"))
	f.Add([]byte("EVAL\x00" + LegacyDeductScript + "\x001\x00seckill:stock:sku_1\x003"))
	f.Add([]byte("EVALSHA\x00" + sha1Hex(LegacyBuyScript) + "\x002\x00seckill:stock:x\x00y\x00u\x00-1"))
	f.Add([]byte("EVAL\x00return 1\x001\x00seckill:stock:\x00"))
	f.Add([]byte("EVAL\x00return   1\x001\x00stock:sku_9:left\x00u1\x002"))
	r := &Router{legacy: newLegacyScripts([]conf.LegacyScript{{Name: "mine", Body: "return 1", StockKey: "stock:{sku}:left", Keys: 1, QtyArg: 2, UIDArg: 1}})}
	f.Fuzz(func(t *testing.T, in []byte) {
		args := bytes.Split(in, []byte{0})
		req, err, ok := r.legacyBuy(args)
		if !ok || err != nil {
			return
		}
		if !sale.ValidID([]byte(req.SKU)) || !sale.ValidID([]byte(req.UID)) || req.Qty < 1 || req.Ints == nil {
			t.Fatalf("accepted %q as %+v", in, req)
		}
	})
}

// TestLearnedSHAsBounded: copies of a script that differ only in whitespace are all
// recognised, but no more than maxLearnedSHAs of their SHA1s are kept.
func TestLearnedSHAsBounded(t *testing.T) {
	l := newLegacyScripts(nil)
	for i := range maxLearnedSHAs + 100 {
		body := LegacyBuyScript + strings.Repeat(" ", i+1)
		if l.byBody([]byte(body)) == nil {
			t.Fatalf("copy %d not recognised", i)
		}
	}
	if n := len(l.bySHA); n > maxLearnedSHAs+2 {
		t.Fatalf("%d SHA1s kept, want at most %d learned besides the built-ins", n, maxLearnedSHAs)
	}
}
