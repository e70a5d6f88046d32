package luabound

import (
	"errors"
	"fmt"
	"time"
)

// The cost model's own cost. The model works out each name's size and each loop's length from
// what the names are given, and a name may be given names that are given names in turn: a
// chain of K lines can name 2^K paths to its first value (local a1 = a0 + a0, local a2 = a1 +
// a1, ...). Every such answer is worked out once and kept (sizes, bounds, loops' lengths), so
// the model's work grows with the script's size, not with its paths; and because that is an
// argument about code that may be wrong one day, the work is also counted: a judgement that
// takes more than StepsPerToken steps per token of the script (MinSteps at the least), or runs
// past MaxJudgeTime, refuses the script as too complex to judge. A refusal is what any
// script the proxy cannot judge gets: it does not run.

const (
	// StepsPerToken is the work a judgement may do for each token of the script.
	StepsPerToken = 256
	// MinSteps is the work any judgement may do, however short the script.
	MinSteps = 1 << 16
	// MaxJudgeTime bounds one judgement in time, whatever the count of steps says.
	MaxJudgeTime = 200 * time.Millisecond
)

// ErrTooComplex is in the refusal of a script whose judgement ran out of steps: the same
// script is refused again, so the verdict may be kept. ErrOutOfTime is in one that ran out of
// time (a machine too busy, perhaps): the verdict is not to be kept.
var (
	ErrTooComplex = errors.New("the script is too complex for the proxy to judge")
	ErrOutOfTime  = errors.New("the script could not be judged in time")
)

func errTooComplex(steps int, took time.Duration) error {
	return fmt.Errorf("%w (over %d steps of its cost model, %v): its names depend on each other in too many ways", ErrTooComplex, steps, took.Round(time.Millisecond))
}

func errOutOfTime(steps int, took time.Duration) error {
	return fmt.Errorf("%w (%v, %d steps of its cost model, over %v): try again", ErrOutOfTime, took.Round(time.Millisecond), steps, MaxJudgeTime)
}

// budget counts a judgement's steps.
type budget struct {
	steps, max int
	start      time.Time
	over       error
}

func newBudget(tokens int) budget {
	return budget{max: max(MinSteps, StepsPerToken*tokens), start: time.Now()}
}

// spend counts n steps, and says whether the judgement may go on.
func (b *budget) spend(n int) bool {
	if b.over != nil {
		return false
	}
	before := b.steps
	b.steps += n
	if b.steps > b.max {
		b.over = errTooComplex(b.max, time.Since(b.start))
		return false
	}
	if b.steps>>10 != before>>10 { // the clock, once every 1,024 steps
		if took := time.Since(b.start); took > MaxJudgeTime {
			b.over = errOutOfTime(b.steps, took)
			return false
		}
	}
	return true
}
