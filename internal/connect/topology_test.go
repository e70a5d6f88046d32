package connect

import (
	"context"
	"slices"
	"testing"

	"seckill-proxy/internal/testenv"
)

// A cluster's views mid-failover: 7002 (master of 10923-16383, epoch 5) has died and its
// replica 7005 was promoted (epoch 8). One node has not heard yet.
const (
	staleView = `a0 127.0.0.1:7000@17000 myself,master - 0 0 1 connected 0-5460
a1 127.0.0.1:7001@17001 master - 0 0 2 connected 5461-10922
a2 127.0.0.1:7002@17002 master - 0 0 5 connected 10923-16383
a3 127.0.0.1:7003@17003 slave a0 0 0 1 connected
a4 127.0.0.1:7004@17004 slave a1 0 0 2 connected
a5 127.0.0.1:7005@17005 slave a2 0 0 5 connected
`
	freshView = `a0 127.0.0.1:7000@17000 master - 0 0 1 connected 0-5460
a1 127.0.0.1:7001@17001 myself,master - 0 0 2 connected 5461-10922
a2 127.0.0.1:7002@17002 master,fail - 0 0 5 disconnected
a3 127.0.0.1:7003@17003 slave a0 0 0 1 connected
a4 127.0.0.1:7004@17004 slave a1 0 0 2 connected
a5 127.0.0.1:7005@17005,host-5 master - 0 0 8 connected 10923-16383 [100->-a1]
`
)

func mustParse(t *testing.T, text string) []clusterNode {
	t.Helper()
	v, err := parseClusterNodes(text)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// TestBestViewAfterFailover: the view that has seen the promotion wins, whichever order the
// answers came in, and whether or not the dead master could be dialled; its map has the new
// master first and leaves the failed node out.
func TestBestViewAfterFailover(t *testing.T) {
	stale, fresh := mustParse(t, staleView), mustParse(t, freshView)
	for _, unreachable := range []map[string]bool{nil, {"127.0.0.1:7002": true}} {
		for _, views := range [][][]clusterNode{{stale, fresh}, {fresh, stale}} {
			best := bestView(views, unreachable)
			slots, addrs := slotMap(best)
			if len(slots) != 3 {
				t.Fatalf("%d slot ranges, want 3: %+v", len(slots), slots)
			}
			last := slots[2]
			if last.Start != 10923 || last.End != 16383 || last.Nodes[0].Addr != "127.0.0.1:7005" || len(last.Nodes) != 1 {
				t.Fatalf("slots 10923-16383 went to %+v, want 7005 alone (7002 failed)", last)
			}
			if slots[0].Nodes[0].Addr != "127.0.0.1:7000" || len(slots[0].Nodes) != 2 || slots[0].Nodes[1].Addr != "127.0.0.1:7003" {
				t.Fatalf("slots 0-5460: %+v, want 7000 and its replica 7003", slots[0])
			}
			if len(addrs) != 6 {
				t.Fatalf("the map's nodes: %v", addrs)
			}
		}
	}
	// A view that names a master this loader could not reach loses, even at a higher epoch.
	unreachable := map[string]bool{"127.0.0.1:7005": true}
	if best := bestView([][]clusterNode{fresh, stale}, unreachable); best[2].failing {
		t.Fatalf("a view naming the unreachable 7005 won over one that does not")
	}
}

func TestParseClusterNodesRefusesJunk(t *testing.T) {
	for _, text := range []string{"", "a b c\n", "a0 127.0.0.1:7000@17000 master - 0 0 x connected 0-5460\n",
		"a0 127.0.0.1:7000@17000 master - 0 0 1 connected 0-99999\n", "a0 127.0.0.1:7000@17000 master - 0 0 1 connected 9-3\n"} {
		if _, err := parseClusterNodes(text); err == nil {
			t.Errorf("parseClusterNodes(%q) took it", text)
		}
	}
}

// TestTopologyOfTheCluster: the loader's map of the dev stack's cluster covers every slot,
// each with a master first.
func TestTopologyOfTheCluster(t *testing.T) {
	cfg := testenv.Config(t)
	testenv.Redis(t)
	top := NewTopology(cfg.Redis)
	masters, err := top.Masters(context.Background())
	if err != nil || len(masters) < 1 {
		t.Fatalf("masters %v: %v", masters, err)
	}
	slots, err := top.load(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	covered := 0
	for _, s := range slots {
		covered += s.End - s.Start + 1
		if len(s.Nodes) == 0 {
			t.Fatalf("slots %d-%d have no node", s.Start, s.End)
		}
	}
	if covered != 16384 {
		t.Fatalf("the map covers %d slots, want 16384", covered)
	}
}

// FuzzParseClusterNodes: any text is read or refused, never a panic, and every slot range
// it reads is within the cluster's slots.
func FuzzParseClusterNodes(f *testing.F) {
	f.Add(staleView)
	f.Add(freshView)
	f.Add("a0 :0@0 master,noaddr - 0 0 0 connected\n")
	f.Fuzz(func(t *testing.T, text string) {
		v, err := parseClusterNodes(text)
		if err != nil {
			return
		}
		for _, n := range v {
			for _, r := range n.slots {
				if r[0] < 0 || r[1] > 16383 || r[0] > r[1] {
					t.Fatalf("slot range %v read from %q", r, text)
				}
			}
		}
		slotMap(bestView([][]clusterNode{v}, nil))
		masters, err := Replicas(text)
		if err != nil {
			t.Fatalf("Replicas refused %q, which parseClusterNodes read: %v", text, err)
		}
		for m, rs := range masters {
			if slices.Contains(rs, m) {
				t.Fatalf("%s listed as its own replica in %q", m, text)
			}
		}
		if m, r, err := SlotReplica(text, 0); err != nil || (r != "" && (m == "" || r == m)) {
			t.Fatalf("SlotReplica(%q, 0) = %q, %q, %v", text, m, r, err)
		}
	})
}

func TestSlotOwner(t *testing.T) {
	text := "a1 127.0.0.1:7000@17000 myself,master - 0 0 1 connected 0-5460\n" +
		"b2 127.0.0.1:7001@17001 master,fail - 0 0 2 connected 5461-10922\n" +
		"c3 127.0.0.1:7004@17004 master - 0 0 7 connected 5461-10922 [5000->-x]\n" +
		"d4 127.0.0.1:7002@17002 master - 0 0 3 connected 10923-16383\n" +
		"e5 127.0.0.1:7003@17003 slave a1 0 0 1 connected\n"
	for slot, want := range map[int]string{0: "127.0.0.1:7000", 5461: "127.0.0.1:7004", 16383: "127.0.0.1:7002"} {
		if got, err := SlotOwner(text, slot); err != nil || got != want {
			t.Errorf("slot %d: %q, %v; want %q", slot, got, err, want)
		}
	}
	if got, err := SlotOwner("a1 127.0.0.1:7000@17000 master,fail - 0 0 1 connected 0-16383\n", 7); err != nil || got != "" {
		t.Errorf("only a failing master: %q, %v", got, err)
	}
	if _, err := SlotOwner("garbage\n", 0); err == nil {
		t.Error("a malformed view was read")
	}
}

func TestSlotReplica(t *testing.T) {
	text := "a1 127.0.0.1:7000@17000 myself,master - 0 0 1 connected 0-5460\n" +
		"d4 127.0.0.1:7002@17002 master - 0 0 3 connected 5461-16383\n" +
		"e5 127.0.0.1:7003@17003 slave,fail a1 0 0 1 connected\n" +
		"f6 127.0.0.1:7004@17004 slave a1 0 0 1 connected\n" +
		"g7 127.0.0.1:7005@17005 slave b9 0 0 1 connected\n"
	for slot, want := range map[int][2]string{0: {"127.0.0.1:7000", "127.0.0.1:7004"}, 9000: {"127.0.0.1:7002", ""}} {
		m, r, err := SlotReplica(text, slot)
		if err != nil || m != want[0] || r != want[1] {
			t.Errorf("slot %d: %q, %q, %v; want %q", slot, m, r, err, want)
		}
	}
	if _, _, err := SlotReplica("garbage\n", 0); err == nil {
		t.Error("a malformed view was read")
	}
}

func TestReplicas(t *testing.T) {
	text := "a1 127.0.0.1:7000@17000 myself,master - 0 0 1 connected 0-5460\n" +
		"d4 127.0.0.1:7002@17002 master - 0 0 3 connected 5461-16383\n" +
		"x9 127.0.0.1:7009@17009 master - 0 0 3 connected\n" +
		"e5 127.0.0.1:7003@17003 slave,fail a1 0 0 1 connected\n" +
		"f6 127.0.0.1:7004@17004 slave a1 0 0 1 connected\n"
	got, err := Replicas(text)
	if err != nil || len(got) != 2 || len(got["127.0.0.1:7000"]) != 1 || got["127.0.0.1:7000"][0] != "127.0.0.1:7004" || len(got["127.0.0.1:7002"]) != 0 {
		t.Errorf("Replicas: %v, %v; want 7000 with 7004 alone, 7002 with none, no slotless master", got, err)
	}
	if _, err := Replicas("garbage\n"); err == nil {
		t.Error("a malformed view was read")
	}
}
