// Package retry is the one backoff of the proxy and the sink, with jitter: the waits between
// the attempts at something that keeps failing (a Kafka producer that cannot connect, a MySQL
// commit) double from a floor to a ceiling, each drawn at random within a quarter of its
// nominal value either way, so that many processes restarted together do not retry in step.
package retry

import (
	"time"

	"github.com/cenkalti/backoff/v5"
)

// jitter is how far a wait may stray from its nominal value, as a share of it.
const jitter = 0.25

// New is the backoff from floor to ceiling: the first wait is floor give or take a quarter,
// each next one nominally twice the last, and no wait is longer than ceiling. It never stops
// by itself (the caller's context does). It is not safe for concurrent use.
func New(floor, ceiling time.Duration) *backoff.ExponentialBackOff {
	ceiling = max(ceiling, floor)
	b := &backoff.ExponentialBackOff{
		InitialInterval:     floor,
		RandomizationFactor: jitter,
		Multiplier:          2,
		MaxInterval:         time.Duration(float64(ceiling) / (1 + jitter)),
	}
	b.Reset()
	return b
}
