package guard

import (
	"errors"
	"fmt"
	"strconv"
	"time"
)

// Errors a buy or an admin command can end with. Each one's text starts with the code word
// that its RESP error reply starts with, so the router writes err.Error() as it is. Use
// errors.Is with the sentinels and errors.As with DuplicateError.
var (
	// ErrSoldOut: the sale has less stock than the buy asked for.
	ErrSoldOut = errors.New("SOLDOUT")
	// ErrClosed: no open sale: never warmed, not started, ended, closed, or being warmed.
	ErrClosed = errors.New("CLOSED")
	// ErrUnavailable: Redis (or, for WARM, MySQL) could not be reached in time. A buy never
	// falls through to MySQL.
	ErrUnavailable = errors.New("UNAVAILABLE")
	// ErrBadArgs: an argument is malformed or out of range.
	ErrBadArgs = errors.New("ERR")
	// ErrBusy: the limit of calls in flight to Redis is reached.
	ErrBusy = errors.New("BUSY")
	// ErrLimited: admission refused the buy before Redis (see LimitedError).
	ErrLimited = errors.New("LIMITED")
)

// Reasons a buy is LIMITED.
const (
	LimitedRate   = "rate"   // the sale's rate is spent for now
	LimitedBuyer  = "buyer"  // the buyer made too many attempts in the window
	LimitedDenied = "denied" // the buyer is on the deny list
)

// LimitedError: a buy refused by admission, never sent to Redis: "LIMITED <reason>
// <retry-after-ms>". RetryAfter is when trying again may pass; -1 ms: not before an admin's
// SECKILL.ALLOW. Make it with NewLimited, which renders the text once.
type LimitedError struct {
	Reason     string
	RetryAfter time.Duration
	text       string
}

// NewLimited returns the LIMITED answer for reason, to retry after retry (negative: never).
func NewLimited(reason string, retry time.Duration) *LimitedError {
	e := &LimitedError{Reason: reason, RetryAfter: retry}
	e.text = "LIMITED " + reason + " " + strconv.FormatInt(e.retryMs(), 10)
	return e
}

// retryMs is the retry-after in whole milliseconds, rounded up; -1 for never.
func (e *LimitedError) retryMs() int64 {
	if e.RetryAfter < 0 {
		return -1
	}
	return int64((e.RetryAfter + time.Millisecond - 1) / time.Millisecond)
}

func (e *LimitedError) Error() string {
	if e.text == "" {
		return NewLimited(e.Reason, e.RetryAfter).text
	}
	return e.text
}

// Is makes errors.Is(err, ErrLimited) hold.
func (e *LimitedError) Is(target error) bool { return target == ErrLimited }

// DuplicateError: the buyer already holds an order in this sale. A client retrying after a
// lost reply learns its order id from it.
type DuplicateError struct{ OrderID string }

func (e *DuplicateError) Error() string { return "DUPLICATE " + e.OrderID }

func soldOut(sku string) error { return fmt.Errorf("%w %s", ErrSoldOut, sku) }

// saleEnded is the buy script's word for a sale past its end time (CLOSED ended).
const saleEnded = "ended"

func closed(why string) error { return fmt.Errorf("%w %s", ErrClosed, why) }

// errNotWarmed answers a buy of a SKU with no sale, as the buy script does.
var errNotWarmed = closed("not warmed")

func unavailable(err error) error { return fmt.Errorf("%w %v", ErrUnavailable, err) }

func badArgs(format string, a ...any) error {
	return fmt.Errorf("%w %s", ErrBadArgs, fmt.Sprintf(format, a...))
}
