package guard

import (
	"errors"
	"testing"
)

// intStyle answers every buy with the integer 7, as a reply style set at parse time would.
type intStyle struct{}

func (intStyle) AppendBuyReply(dst []byte, _ *BuyRequest, _ BuyResult) []byte {
	return append(dst, ":7\r\n"...)
}

// TestAppendReply: a buy's reply is made in the style its request carries; with none, an
// order id is a bulk string and an error one line, whatever its text holds.
func TestAppendReply(t *testing.T) {
	plain := BuyRequest{SKU: "s", UID: "u"}
	for _, tt := range []struct {
		req  BuyRequest
		res  BuyResult
		want string
	}{
		{plain, BuyResult{OrderID: "o1"}, "$2\r\no1\r\n"},
		{plain, BuyResult{Err: ErrSoldOut}, "-" + ErrSoldOut.Error() + "\r\n"},
		{plain, BuyResult{Err: errors.New("ERR two\r\nlines\n")}, "-ERR two  lines \r\n"},
		{BuyRequest{Reply: intStyle{}}, BuyResult{OrderID: "o1"}, ":7\r\n"},
	} {
		if got := string(tt.req.AppendReply([]byte("x"), tt.res)); got != "x"+tt.want {
			t.Errorf("AppendReply(%+v) = %q, want %q", tt.res, got, "x"+tt.want)
		}
	}
}

// TestDetachedAttempt: an attempt of no guard goes by its SKU, and after NOSCRIPT as EVAL.
func TestDetachedAttempt(t *testing.T) {
	a := DetachedAttempt(BuyRequest{SKU: "s", UID: "u", Qty: 2})
	if a.Tag() != "s" || a.Group() != (CallGroup{SKU: "s"}) || a.Request().Qty != 2 {
		t.Fatalf("tag %q, group %+v, request %+v", a.Tag(), a.Group(), a.Request())
	}
	a.NoScript()
	if !a.Group().Eval {
		t.Fatal("after NOSCRIPT the group is not EVAL's")
	}
}
