package guard

import (
	"errors"
	"testing"
	"time"

	"go.uber.org/zap"

	"seckill-proxy/conf"
)

// TestNoSales: a SKU found to have no sale is remembered until its time runs out, a forget
// drops it, and a reply read before a forget is not remembered after it; the table is fixed.
func TestNoSales(t *testing.T) {
	var n noSales
	t0 := time.Unix(1000, 0)
	gen := n.generation()
	n.add("junk", t0.Add(time.Second), gen)
	if !n.has("junk", t0) || n.has("other", t0) {
		t.Fatal("has: want junk only")
	}
	if n.has("junk", t0.Add(time.Second)) {
		t.Fatal("still remembered when its time ran out")
	}
	n.forget("junk")
	if n.has("junk", t0) {
		t.Fatal("remembered after a forget (a WARM)")
	}
	n.add("junk", t0.Add(time.Second), gen) // read before the forget
	if n.has("junk", t0) {
		t.Fatal("a reply from before the WARM was remembered after it")
	}
	for i := range 10 * noSaleSlots {
		n.add(string(rune(i)), t0.Add(time.Second), n.generation())
	}
	if len(n.slots) != noSaleSlots {
		t.Fatal("the table grew")
	}
}

// TestAdmitUnknown: buys of SKUs the proxy knows nothing of spend admission.unknown_sku_rate,
// then are LIMITED rate until it refills; a SKU known to have no sale is CLOSED at once.
func TestAdmitUnknown(t *testing.T) {
	now := time.Unix(1000, 0)
	adm := conf.Default().Admission
	adm.UnknownSKURate = 3
	g := &Guard{adm: newAdmission(adm), opt: Options{Now: func() time.Time { return now }}, log: zap.NewNop()}
	for i := range 3 {
		if err := g.admitUnknown("u"+string(rune('a'+i)), now); err != nil {
			t.Fatalf("unknown SKU %d within the rate: %v", i, err)
		}
	}
	var lim *LimitedError
	if err := g.admitUnknown("ud", now); !errors.As(err, &lim) || lim.Reason != LimitedRate || lim.RetryAfter <= 0 {
		t.Fatalf("past the rate: %v, want LIMITED rate with a retry-after", err)
	}
	if err := g.admitUnknown("ud", now.Add(time.Second/3)); err != nil {
		t.Fatalf("a refill later: %v", err)
	}
	g.noSales.add("ua", now.Add(time.Second), g.noSales.generation())
	if err := g.admitUnknown("ua", now); !errors.Is(err, ErrClosed) {
		t.Fatalf("a SKU with no sale: %v, want CLOSED", err)
	}
	if st := g.Stats(); st.NoSale != 1 || st.LimitedUnknown != 1 {
		t.Fatalf("counters: no sale %d, limited unknown %d; want 1 and 1", st.NoSale, st.LimitedUnknown)
	}
}
