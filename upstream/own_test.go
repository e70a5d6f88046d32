package upstream

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
)

// TestOwnSlots: held connections are bounded in all and per master (a share of the node's
// maxclients, read once however many ask at once); past either, ErrTooManyOwn says which;
// tryGet never reads, and a put makes room again.
func TestOwnSlots(t *testing.T) {
	var reads atomic.Int64
	o := &ownSlots{max: 5, share: 0.003, maxClients: func(context.Context, string) (int, error) {
		reads.Add(1)
		return 1000, nil // a share of 0.003: 3 per master
	}}
	ctx := context.Background()
	if o.tryGet("a") {
		t.Fatal("tryGet took a slot on a master whose maxclients was not read")
	}
	var wg sync.WaitGroup
	for range 3 {
		wg.Go(func() {
			if err := o.get(ctx, "a"); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	if n := reads.Load(); n != 1 {
		t.Fatalf("maxclients read %d times, want once", n)
	}
	var busy *ErrTooManyOwn
	if err := o.get(ctx, "a"); !errors.As(err, &busy) || !busy.PerNode || busy.Limit != 3 {
		t.Fatalf("a 4th on one master: %v, want the per-master bound of 3", err)
	}
	if err := o.get(ctx, "b"); err != nil || !o.tryGet("b") {
		t.Fatalf("another master: %v", err)
	}
	if err := o.get(ctx, "b"); !errors.As(err, &busy) || busy.PerNode || busy.Limit != 5 {
		t.Fatalf("a 6th in all: %v, want the proxy's bound of 5", err)
	}
	if o.held() != 5 || o.refused.Load() != 2 {
		t.Fatalf("held %d, refused %d; want 5 and 2", o.held(), o.refused.Load())
	}
	o.put("a")
	if !o.tryGet("a") || o.held() != 5 {
		t.Fatal("no room after a put")
	}
}
