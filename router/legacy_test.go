package router

import (
	"bytes"
	"strconv"
	"strings"
	"testing"

	"seckill-proxy/conf"
	"seckill-proxy/internal/testenv"
	"seckill-proxy/sale"
)

// TestRecognisedByMeaning: the seeds' scripts as their services carry them, verbatim, are
// recognised; a script that does something else is not.
func TestRecognisedByMeaning(t *testing.T) {
	l := newLegacyScripts(nil)
	carried := map[string]string{"seeds' buy": testenv.SeedsBuyAsCarried, "seeds' deduct": testenv.SeedsDeductAsCarried}
	for want, body := range carried {
		ls := l.byBody([]byte(body))
		if ls == nil || ls.name != want {
			t.Errorf("%s as carried: recognised as %v", want, ls)
		}
		if got, _ := l.bySHAOf(sha1Hex(body)); got != ls {
			t.Errorf("%s: its SHA1 was not learned", want)
		}
	}
	other := strings.Replace(LegacyBuyScript, "< tonumber", "<= tonumber", 1)
	if l.byBody([]byte(other)) != nil {
		t.Error("a changed comparison is recognised as the seeds' buy")
	}
	if ls, seen := l.bySHAOf(sha1Hex(other)); ls != nil || !seen {
		t.Errorf("an unrecognised body's SHA1: %v, seen %v; want seen, and no script", ls, seen)
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
	r := &Router{opt: Options{LegacyUIDLess: true}, legacy: newLegacyScripts([]conf.LegacyScript{{Name: "mine", Body: "return 1", StockKey: "stock:{sku}:left", Keys: 1, QtyArg: 2, UIDArg: 1}})}
	f.Fuzz(func(t *testing.T, in []byte) {
		args := bytes.Split(in, []byte{0})
		req, err, ok := r.legacyBuy(args, "u")
		if !ok || err != nil {
			return
		}
		if !sale.ValidID([]byte(req.SKU)) || !sale.ValidID([]byte(req.UID)) || req.Qty < 1 || req.Ints == nil {
			t.Fatalf("accepted %q as %+v", in, req)
		}
	})
}

// TestLearnedSHAsBounded: copies of a script that differ only in whitespace are all
// recognised, but no more than maxLearnedSHAs of their SHA1s are kept; junk loaded first does
// not keep them from being learned.
func TestLearnedSHAsBounded(t *testing.T) {
	l := newLegacyScripts(nil)
	for i := range maxLearnedSHAs + 100 {
		if l.byBody([]byte("return "+strconv.Itoa(i))) != nil {
			t.Fatalf("junk %d recognised", i)
		}
	}
	if _, seen := l.bySHAOf(sha1Hex("return 0")); !seen {
		t.Fatal("a loaded script that is not a stock script was not remembered")
	}
	for i := range maxLearnedSHAs + 100 {
		body := LegacyBuyScript + strings.Repeat(" ", i+1)
		if l.byBody([]byte(body)) == nil {
			t.Fatalf("copy %d not recognised", i)
		}
	}
	if got, seen := l.bySHAOf(sha1Hex(LegacyBuyScript + " ")); !seen || got == nil {
		t.Fatal("a copy after the junk was not learned")
	}
	if n := len(l.bySHA); n > 2*maxLearnedSHAs+3 {
		t.Fatalf("%d SHA1s kept, want at most %d of each kind besides the built-ins", n, maxLearnedSHAs)
	}
}
