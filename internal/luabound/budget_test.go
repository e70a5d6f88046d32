package luabound

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"
)

// chains are scripts whose names depend on each other along 2^k paths: each line gives a
// name the one before it twice. A judge that works out a name once per path to it takes
// 2^k steps (k = 30 held a proxy's event loop for ever).
func chains(k int) map[string]string {
	out := map[string]string{}
	for name, c := range map[string]struct{ first, op, use string }{
		"sums":           {"1", "+", "for i = 1, %s do local x = string.find('x', 'x') end"},
		"sums in a loop": {"#ARGV", "+", "for i = 1, %s do while false do end end"},
		"concatenations": {"redis.call('get', KEYS[1])", "..", "for i = 1, #%s do local x = string.find(%[1]s, 'x') end return %[1]s"},
		"or":             {"redis.call('get', KEYS[1])", "or", "for w in string.gmatch(%s, '.') do end"},
		"and":            {"ARGV[1]", "and", "for i = 1, #%s do end"},
	} {
		var b strings.Builder
		fmt.Fprintf(&b, "local a0 = %s\n", c.first)
		for i := 1; i <= k; i++ {
			fmt.Fprintf(&b, "local a%d = a%d %s a%d\n", i, i-1, c.op, i-1)
		}
		fmt.Fprintf(&b, c.use+"\n", fmt.Sprintf("a%d", k))
		out[name] = b.String()
	}
	return out
}

// TestJudgeIsLinear: judging a script takes steps in proportion to its size, whatever the
// paths between its names: each chain of 60 lines (2^60 paths) is judged, checked and fueled
// in at most 64 steps per token.
func TestJudgeIsLinear(t *testing.T) {
	for _, k := range []int{4, 60, 600} {
		for name, src := range chains(k) {
			for _, fuel := range []int{0, 1 << 20} {
				chunk, f, tokens, err := check(src, fuel > 0)
				if err != nil {
					continue // refused before the cost model: nothing of its to count
				}
				w, _, err := costOf(chunk, f, fuel, tokens)
				if errors.Is(err, ErrTooComplex) || errors.Is(err, ErrOutOfTime) {
					t.Errorf("%s, %d lines, fuel %d: %v", name, k, fuel, err)
				}
				if w.budget.steps > 64*tokens {
					t.Errorf("%s, %d lines, fuel %d: %d steps for %d tokens", name, k, fuel, w.budget.steps, tokens)
				}
			}
		}
	}
}

// TestJudgeBounded: a judgement past its steps, or its time, stops and refuses the script,
// naming why.
func TestJudgeBounded(t *testing.T) {
	b := newBudget(1)
	if b.max != MinSteps {
		t.Fatalf("a one-token script's budget is %d steps, want %d", b.max, MinSteps)
	}
	for i := 0; i < MinSteps; i++ {
		if !b.spend(1) {
			t.Fatalf("refused at step %d of %d", i+1, MinSteps)
		}
	}
	if b.spend(1) || !errors.Is(b.over, ErrTooComplex) {
		t.Fatalf("a step past the budget: %v", b.over)
	}
	if b.spend(0) {
		t.Fatal("a budget spent went on")
	}
	late := budget{max: 1 << 30, start: time.Now().Add(-2 * MaxJudgeTime)}
	for i := 0; i < 1024 && late.spend(1); i++ {
	}
	if !errors.Is(late.over, ErrOutOfTime) {
		t.Fatalf("a judgement past MaxJudgeTime went on: %v", late.over)
	}
}
