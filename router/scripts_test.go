package router

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap"

	"seckill-proxy/conf"
	"seckill-proxy/internal/luabound"
)

// TestVerdictsKeepTheScriptsInUse: a flood of new scripts forgets the least recently used
// verdicts one at a time, not all at once: a script in use all along keeps its verdict.
func TestVerdictsKeepTheScriptsInUse(t *testing.T) {
	var v verdicts
	v.put("in-use", verdict{})
	for i := range 5 * maxVerdicts {
		v.put(fmt.Sprintf("flood-%d", i), verdict{})
		if _, ok := v.get("in-use"); !ok {
			t.Fatalf("the verdict in use was forgotten after %d new scripts", i+1)
		}
	}
	if _, ok := v.get("flood-0"); ok {
		t.Error("the oldest of the flood is still kept: nothing is forgotten")
	}
	big := make([]byte, maxTextBytes/3)
	for i := range 4 {
		v.put(fmt.Sprintf("fueled-%d", i), verdict{text: big})
	}
	if v.bytes > maxTextBytes {
		t.Errorf("%d bytes of fueled texts kept, over %d", v.bytes, maxTextBytes)
	}
	if _, ok := v.get("fueled-3"); !ok {
		t.Error("the newest fueled text was forgotten")
	}
}

// TestAppScriptRefusals: an app user's EVAL over luabound.MaxSource is refused before it is
// hashed; a call whose input makes its script too dear is refused per call, the same script
// with a short argument is not; the conf's fuel bound is the cost model's budget.
func TestAppScriptRefusals(t *testing.T) {
	if conf.MaxAppScriptFuel != luabound.Budget {
		t.Fatalf("conf.MaxAppScriptFuel %d differs from luabound.Budget %d", conf.MaxAppScriptFuel, luabound.Budget)
	}
	r := New(nil, zap.NewNop(), Options{AppScriptFuel: 1 << 22})
	s := r.NewSession("127.0.0.1:1")
	huge := [][]byte{[]byte("EVAL"), make([]byte, luabound.MaxSource+1), []byte("0")}
	if err := r.appScript(s, []byte("eval"), huge, 1); err == nil || !strings.Contains(err.Error(), "over 1048576 bytes") {
		t.Errorf("an EVAL over MaxSource: %v", err)
	}
	if _, ok := r.verdicts.get(sha1Hex(string(huge[1]))); ok {
		t.Error("the huge script was judged and kept")
	}
	src := []byte("return string.find(ARGV[1], '.-.-.-.-b')")
	long := [][]byte{[]byte("EVAL"), src, []byte("0"), []byte(strings.Repeat("a", 1<<20))}
	if err := r.appScript(s, []byte("eval"), long, 1); err == nil || !strings.Contains(err.Error(), "input allows") {
		t.Errorf("a backtracking pattern over a long argument: %v", err)
	}
	short := [][]byte{[]byte("EVALSHA"), []byte(sha1Hex(string(src))), []byte("0"), []byte("aab")}
	if err := r.appScript(s, []byte("evalsha"), short, 1); err != nil {
		t.Errorf("the same script by EVALSHA with a short argument: %v", err)
	}
	if err := r.appScript(s, []byte("eval"), [][]byte{[]byte("EVAL"), src, []byte("nope")}, 1); err != nil {
		t.Errorf("a bad numkeys is Redis's to answer: %v", err)
	}
}

// TestSeedScriptsWithinBudget: the seeds' stock scripts, which an app user may still send
// when the proxy does not run them as buys, are bounded without fuel, and their bound allows
// a call with the seeds' arguments.
func TestSeedScriptsWithinBudget(t *testing.T) {
	for name, src := range map[string]string{"buy": LegacyBuyScript, "deduct": LegacyDeductScript, "deduct, through locals": LegacyDeductLocalScript} {
		b, err := luabound.Analyse(src)
		if err != nil {
			t.Errorf("the seeds' %s: refused: %v", name, err)
			continue
		}
		keys := [][]byte{[]byte("seckill:stock:phone"), []byte("seckill:buyers:phone")}
		if err := b.Allows(keys, [][]byte{[]byte("user-1"), []byte("1")}); err != nil {
			t.Errorf("the seeds' %s: a call refused: %v", name, err)
		}
	}
}

// TestJudgeShare: a connection that has spent its share of judging time is told when to send
// its script again, and is judged again once the window has passed; nothing is kept of a
// script refused that way.
func TestJudgeShare(t *testing.T) {
	var j judgeTime
	now := time.Now()
	if err := j.allowed(now); err != nil {
		t.Fatalf("a new connection: %v", err)
	}
	j.spent(now, judgeShare)
	err := j.allowed(now.Add(time.Second))
	if err == nil || !strings.Contains(err.Error(), "9000 ms") {
		t.Fatalf("a connection past its share: %v, want the wait named", err)
	}
	if err := j.allowed(now.Add(judgeWindow)); err != nil {
		t.Fatalf("the next window: %v", err)
	}
	r := New(nil, zap.NewNop(), Options{AppScriptFuel: 1 << 22})
	s := r.NewSession("127.0.0.1:1")
	s.judging.spent(time.Now(), judgeShare)
	src := []byte("for i = 1, tonumber(ARGV[1]) do end")
	if err := r.appScript(s, []byte("eval"), [][]byte{[]byte("EVAL"), src, []byte("0"), []byte("1")}, 1); err == nil || !strings.HasPrefix(err.Error(), "TRYAGAIN") || !strings.Contains(err.Error(), "its share") {
		t.Fatalf("a new script past the share: %v", err)
	}
	if _, ok := r.verdicts.get(sha1Hex(string(src))); ok {
		t.Fatal("a script refused for the share was kept as judged")
	}
}
