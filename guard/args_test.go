package guard

import (
	"errors"
	"strings"
	"testing"
	"time"

	"seckill-proxy/sale"
)

func bs(ss ...string) [][]byte {
	out := make([][]byte, len(ss))
	for i, s := range ss {
		out[i] = []byte(s)
	}
	return out
}

func TestParseBuy(t *testing.T) {
	long := strings.Repeat("a", 65)
	tests := []struct {
		args    []string
		want    BuyRequest
		errText string
	}{
		{[]string{"sku_1001", "u1"}, BuyRequest{SKU: "sku_1001", UID: "u1", Qty: 1}, ""},
		{[]string{"sku.1001:A-b", "user_9", "3"}, BuyRequest{SKU: "sku.1001:A-b", UID: "user_9", Qty: 3}, ""},
		{[]string{strings.Repeat("s", 64), strings.Repeat("u", 64), "10000"}, BuyRequest{SKU: strings.Repeat("s", 64), UID: strings.Repeat("u", 64), Qty: 10000}, ""},
		{[]string{"sku"}, BuyRequest{}, "wrong number of arguments"},
		{[]string{"sku", "u", "1", "x"}, BuyRequest{}, "wrong number of arguments"},
		{[]string{"", "u"}, BuyRequest{}, "sku must be 1-64 characters"},
		{[]string{long, "u"}, BuyRequest{}, "sku must be 1-64 characters"},
		{[]string{"sk u", "u"}, BuyRequest{}, "sku must be"},
		{[]string{"{sku}", "u"}, BuyRequest{}, "sku must be"},
		{[]string{"sku", ""}, BuyRequest{}, "uid must be 1-64 characters"},
		{[]string{"sku", "u\n1"}, BuyRequest{}, "uid must be"},
		{[]string{"sku", long}, BuyRequest{}, "uid must be"},
		{[]string{"sku", "u", "0"}, BuyRequest{}, "qty must be an integer from 1"},
		{[]string{"sku", "u", "-1"}, BuyRequest{}, "qty must be"},
		{[]string{"sku", "u", "+1"}, BuyRequest{}, "qty must be"},
		{[]string{"sku", "u", "01"}, BuyRequest{}, "qty must be"},
		{[]string{"sku", "u", "1.5"}, BuyRequest{}, "qty must be"},
		{[]string{"sku", "u", "10001"}, BuyRequest{}, "qty must be"},
		{[]string{"sku", "u", "99999999999999999999"}, BuyRequest{}, "qty must be"},
		{[]string{"sku", "u", ""}, BuyRequest{}, "qty must be"},
	}
	for _, tt := range tests {
		got, err := ParseBuy(bs(tt.args...))
		if tt.errText == "" {
			if err != nil || got != tt.want {
				t.Errorf("ParseBuy(%q) = %+v, %v; want %+v", tt.args, got, err, tt.want)
			}
			continue
		}
		if err == nil || !strings.Contains(err.Error(), tt.errText) || !errors.Is(err, ErrBadArgs) || !strings.HasPrefix(err.Error(), "ERR ") {
			t.Errorf("ParseBuy(%q) error = %v; want an ERR containing %q", tt.args, err, tt.errText)
		}
	}
}

func TestParseWarm(t *testing.T) {
	tests := []struct {
		args    []string
		sku     string
		want    WarmOptions
		errText string
	}{
		{[]string{"sku_1"}, "sku_1", WarmOptions{Limit: 1}, ""},
		{[]string{"sku_1", "start", "1000", "END", "2000", "Limit", "5", "force"}, "sku_1", WarmOptions{StartMs: 1000, EndMs: 2000, Limit: 5, Force: true}, ""},
		{[]string{"sku_1", "END", "5"}, "sku_1", WarmOptions{EndMs: 5, Limit: 1}, ""},
		{[]string{}, "", WarmOptions{}, "wrong number of arguments"},
		{[]string{"bad sku"}, "", WarmOptions{}, "sku must be"},
		{[]string{"sku_1", "START"}, "", WarmOptions{}, "START needs a value"},
		{[]string{"sku_1", "LIMIT", "0"}, "", WarmOptions{}, "LIMIT must be a positive integer"},
		{[]string{"sku_1", "LIMIT", "10001"}, "", WarmOptions{}, "LIMIT must be from 1 to 10000"},
		{[]string{"sku_1", "START", "x"}, "", WarmOptions{}, "START must be a positive integer"},
		{[]string{"sku_1", "START", "10", "END", "10"}, "", WarmOptions{}, "END 10 must be after START 10"},
		{[]string{"sku_1", "FORCE", "force"}, "", WarmOptions{}, "FORCE given twice"},
		{[]string{"sku_1", "SOON"}, "", WarmOptions{}, `unknown option "SOON"`},
		{[]string{"sku_1", "RATE", "1000"}, "sku_1", WarmOptions{Limit: 1, Rate: 1000, Burst: 100}, ""},
		{[]string{"sku_1", "rate", "5", "burst", "50"}, "sku_1", WarmOptions{Limit: 1, Rate: 5, Burst: 50}, ""},
		{[]string{"sku_1", "RATE", "3"}, "sku_1", WarmOptions{Limit: 1, Rate: 3, Burst: 1}, ""},
		{[]string{"sku_1", "BURST", "5"}, "", WarmOptions{}, "BURST needs RATE"},
		{[]string{"sku_1", "BUCKETS", "3"}, "sku_1", WarmOptions{Limit: 1, Buckets: 3}, ""},
		{[]string{"sku_1", "buckets", "16", "FORCE"}, "sku_1", WarmOptions{Limit: 1, Buckets: 16, Force: true}, ""},
		{[]string{"sku_1", "BUCKETS", "17"}, "", WarmOptions{}, "BUCKETS must be from 1 to 16, got 17"},
		{[]string{"sku_1", "BUCKETS", "0"}, "", WarmOptions{}, "BUCKETS must be a positive integer"},
		{[]string{"sku_1", "BUCKETS"}, "", WarmOptions{}, "BUCKETS needs a value"},
		{[]string{"sku_1", "RATE", "0"}, "", WarmOptions{}, "RATE must be an integer from 1"},
		{[]string{"sku_1", "RATE", "off"}, "", WarmOptions{}, "RATE OFF is for SECKILL.LIMIT"},
		{[]string{"sku_1", "RATE", "10000001"}, "", WarmOptions{}, "RATE must be an integer from 1 to 10000000"},
		{[]string{"sku_1", "RATE"}, "", WarmOptions{}, "RATE needs a value"},
		{[]string{"sku_1", "RATE", "5", "RATE", "6"}, "", WarmOptions{}, "RATE given twice"},
	}
	for _, tt := range tests {
		sku, got, err := ParseWarm(bs(tt.args...))
		if tt.errText == "" {
			if err != nil || got != tt.want || sku != tt.sku {
				t.Errorf("ParseWarm(%q) = %q %+v, %v; want %q %+v", tt.args, sku, got, err, tt.sku, tt.want)
			}
			continue
		}
		if err == nil || !strings.Contains(err.Error(), tt.errText) || !errors.Is(err, ErrBadArgs) {
			t.Errorf("ParseWarm(%q) error = %v; want %q", tt.args, err, tt.errText)
		}
	}
}

func TestKeysShareOneHashTag(t *testing.T) {
	k := sale.KeysFor("sku_1001")
	for _, key := range k.ScriptKeys() {
		if !strings.HasPrefix(key, "seckill:{sku_1001}:") {
			t.Errorf("key %q lacks the hash tag {sku_1001}", key)
		}
	}
}

// FuzzParseBuy checks that ParseBuy never panics, and that whatever it accepts is valid:
// ids of the allowed alphabet and length, qty in range, and a reply that round-trips.
func FuzzParseBuy(f *testing.F) {
	f.Add("sku_1001", "u1", "1", 3)
	f.Add("sku", "uid", "", 2)
	f.Add("", "", "0", 3)
	f.Add("s k", "u", "-5", 3)
	f.Add("sku", "u", "99999999999999999999", 3)
	f.Add("sku", "u", "+1", 3)
	f.Fuzz(func(t *testing.T, sku, uid, qty string, n int) {
		args := bs(sku, uid, qty)
		if n >= 0 && n < len(args) {
			args = args[:n]
		}
		req, err := ParseBuy(args)
		if err != nil {
			if !errors.Is(err, ErrBadArgs) || strings.ContainsAny(err.Error(), "\r\n") {
				t.Fatalf("error %q is not a clean ERR", err)
			}
			return
		}
		if !sale.ValidID([]byte(req.SKU)) || !sale.ValidID([]byte(req.UID)) || req.Qty < 1 || req.Qty > sale.MaxLimit {
			t.Fatalf("accepted an invalid request %+v from %q", req, args)
		}
		if req.SKU != sku || req.UID != uid {
			t.Fatalf("ids changed: %+v from %q", req, args)
		}
	})
}

// FuzzParseWarm checks that ParseWarm never panics and keeps its invariants.
func TestParseLimitAndDeny(t *testing.T) {
	for _, tt := range []struct {
		args    []string
		want    LimitOptions
		errText string
	}{
		{[]string{"s", "RATE", "2000"}, LimitOptions{2000, 200}, ""},
		{[]string{"s", "burst", "7", "rate", "70"}, LimitOptions{70, 7}, ""},
		{[]string{"s", "RATE", "OFF"}, LimitOptions{}, ""},
		{[]string{"s", "RATE", "off", "BURST", "3"}, LimitOptions{}, "BURST makes no sense"},
		{[]string{"s", "BURST", "3", "BURST", "4"}, LimitOptions{}, "BURST given twice"},
		{[]string{"s", "BURST", "3"}, LimitOptions{}, "RATE is required"},
		{[]string{"s", "BURST", "3", "LIMIT", "4"}, LimitOptions{}, `unknown option "LIMIT"`},
		{[]string{"s", "RATE", "-1"}, LimitOptions{}, "RATE must be an integer"},
		{[]string{"s"}, LimitOptions{}, "wrong number of arguments"},
		{[]string{"bad sku", "RATE", "1"}, LimitOptions{}, "sku must be"},
	} {
		_, got, err := ParseLimit(bs(tt.args...))
		if tt.errText == "" {
			if err != nil || got != tt.want {
				t.Errorf("ParseLimit(%q) = %+v, %v; want %+v", tt.args, got, err, tt.want)
			}
		} else if err == nil || !strings.Contains(err.Error(), tt.errText) || !errors.Is(err, ErrBadArgs) {
			t.Errorf("ParseLimit(%q) error = %v; want %q", tt.args, err, tt.errText)
		}
	}
	for _, tt := range []struct {
		args    []string
		ttl     time.Duration
		errText string
	}{
		{[]string{"u1"}, 0, ""},
		{[]string{"u1", "ttl", "60"}, time.Minute, ""},
		{[]string{"u1", "TTL", "0"}, 0, "TTL must be"},
		{[]string{"u1", "TTL", "31536001"}, 0, "TTL must be"},
		{[]string{"u1", "EX", "5"}, 0, `unknown option "EX"`},
		{[]string{"u 1"}, 0, "uid must be"},
		{[]string{"u1", "TTL"}, 0, "wrong number of arguments"},
	} {
		_, got, err := ParseDeny(bs(tt.args...))
		if tt.errText == "" {
			if err != nil || got.TTL != tt.ttl {
				t.Errorf("ParseDeny(%q) = %+v, %v; want TTL %v", tt.args, got, err, tt.ttl)
			}
		} else if err == nil || !strings.Contains(err.Error(), tt.errText) || !errors.Is(err, ErrBadArgs) {
			t.Errorf("ParseDeny(%q) error = %v; want %q", tt.args, err, tt.errText)
		}
	}
}

func TestLimitedError(t *testing.T) {
	for _, tt := range []struct {
		err  *LimitedError
		want string
	}{
		{NewLimited(LimitedRate, 1500*time.Microsecond), "LIMITED rate 2"},
		{NewLimited(LimitedBuyer, 990*time.Millisecond), "LIMITED buyer 990"},
		{NewLimited(LimitedDenied, -1), "LIMITED denied -1"},
		{&LimitedError{Reason: LimitedRate, RetryAfter: time.Millisecond}, "LIMITED rate 1"},
	} {
		if got := tt.err.Error(); got != tt.want || !errors.Is(tt.err, ErrLimited) {
			t.Errorf("%+v = %q, want %q and ErrLimited", tt.err, got, tt.want)
		}
	}
}

func FuzzParseLimit(f *testing.F) {
	f.Add("sku_1", "RATE 1000 BURST 100")
	f.Add("sku_1", "RATE OFF")
	f.Add("sku_1", "BURST 1 RATE 99999999999")
	f.Fuzz(func(t *testing.T, sku, opts string) {
		args := append(bs(sku), bs(strings.Fields(opts)...)...)
		got, opt, err := ParseLimit(args)
		if err != nil {
			if !errors.Is(err, ErrBadArgs) {
				t.Fatalf("error %v is not ERR", err)
			}
			return
		}
		if got != sku || opt.Rate < 0 || opt.Rate > MaxRate || (opt.Rate > 0) != (opt.Burst > 0) || opt.Burst > MaxRate {
			t.Fatalf("accepted %q %+v from %q", got, opt, args)
		}
	})
}

func FuzzParseWarm(f *testing.F) {
	f.Add("sku_1", "START 1000 END 2000 LIMIT 2 FORCE")
	f.Add("sku_1", "LIMIT")
	f.Add("sku_1", "END 1 START 2")
	f.Add("bad sku", "")
	f.Add("sku_1", "RATE 1000 BURST 100")
	f.Add("sku_1", "BUCKETS 3 FORCE")
	f.Fuzz(func(t *testing.T, sku, opts string) {
		args := append(bs(sku), bs(strings.Fields(opts)...)...)
		got, opt, err := ParseWarm(args)
		if err != nil {
			if !errors.Is(err, ErrBadArgs) {
				t.Fatalf("error %v is not ERR", err)
			}
			return
		}
		if got != sku || opt.Limit < 1 || opt.Limit > sale.MaxLimit || (opt.EndMs != 0 && opt.EndMs <= opt.StartMs) ||
			(opt.Rate > 0) != (opt.Burst > 0) || opt.Rate > MaxRate || opt.Burst > MaxRate ||
			opt.Buckets < 0 || opt.Buckets > sale.MaxBuckets {
			t.Fatalf("accepted %q %+v from %q", got, opt, args)
		}
	})
}

// TestParseStatus: SECKILL.STATUS's arguments, with and without WAIT, and the bound on it.
func TestParseStatus(t *testing.T) {
	const max = 30 * time.Second
	for _, tt := range []struct {
		args string
		want time.Duration
		err  bool
	}{
		{"sku_1 u1", 0, false},
		{"sku_1 u1 WAIT 500", 500 * time.Millisecond, false},
		{"sku_1 u1 wait 500", 500 * time.Millisecond, false},
		{"sku_1 u1 WAIT 0", max, false},
		{"sku_1 u1 WAIT 99999999999", max, false},
		{"sku_1 u1 WAIT -1", 0, true},
		{"sku_1 u1 WAIT 1.5", 0, true},
		{"sku_1 u1 WAIT", 0, true},
		{"sku_1 u1 BLOCK 5", 0, true},
		{"sku_1 u1 WAIT 5 x", 0, true},
		{"sku_1", 0, true},
		{"bad/sku u1 WAIT 5", 0, true},
	} {
		req, err := ParseStatus(bs(strings.Fields(tt.args)...), max)
		switch {
		case tt.err && (err == nil || !errors.Is(err, ErrBadArgs)):
			t.Errorf("%q: %+v, %v; want ERR", tt.args, req, err)
		case !tt.err && (err != nil || req.Wait != tt.want || req.SKU != "sku_1" || req.UID != "u1"):
			t.Errorf("%q: %+v, %v; want wait %v", tt.args, req, err, tt.want)
		}
	}
}

func FuzzParseStatus(f *testing.F) {
	f.Add("sku_1 u1")
	f.Add("sku_1 u1 WAIT 500")
	f.Add("sku_1 u1 WAIT 0")
	f.Add("sku_1 u1 wait -5")
	f.Fuzz(func(t *testing.T, in string) {
		const max = time.Minute
		args := bs(strings.Fields(in)...)
		req, err := ParseStatus(args, max)
		if err != nil {
			if !errors.Is(err, ErrBadArgs) {
				t.Fatalf("error %v is not ERR", err)
			}
			return
		}
		if req.Wait < 0 || req.Wait > max || (len(args) == 4) != (req.Wait > 0) || !sale.ValidID([]byte(req.SKU)) || !sale.ValidID([]byte(req.UID)) {
			t.Fatalf("accepted %+v from %q", req, in)
		}
	})
}
