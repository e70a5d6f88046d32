package upstream

import (
	"context"
	"strings"
	"testing"
)

// planCluster is tableCluster with its pass-through user verified and the masters of the
// slots of {a} and {b} known: "m1:7000" and "m2:7001". standalone, if set, is the one server.
func planCluster(standalone string) *Cluster {
	c := tableCluster()
	c.opt.Standalone = standalone
	c.verified.Store(true)
	c.slotCache.put(Slot([]byte("{a}")), "m1:7000")
	c.slotCache.put(Slot([]byte("{b}")), "m2:7001")
	return c
}

// TestPlanRoutesByKeys: what plan promises the router of a command its policy let through.
// A command goes to its keys' master with their slot; keys of one slot go together; keys over
// several slots are split for the commands Redis answers key by key (MGET, MSET, DEL, ...),
// refused CROSSSLOT for the others; a command with no keys may go to any master; the whole
// server's commands (DBSIZE) are merged over every master; a standalone server takes all.
// planDescribed, from the policy's description (Describe), plans each alike.
func TestPlanRoutesByKeys(t *testing.T) {
	ctx := context.Background()
	c := planCluster("")
	table := c.info.Load()
	slotA := Slot([]byte("{a}"))
	cases := []struct {
		args    string
		addr    string
		slot    uint16
		special bool
		any     bool
		reply   string
	}{
		{args: "GET {a}x", addr: "m1:7000", slot: slotA},
		{args: "get {b}y", addr: "m2:7001", slot: Slot([]byte("{b}"))},
		{args: "MGET {a}1 {a}2", addr: "m1:7000", slot: slotA},
		{args: "MGET {a}1 {b}2", special: true},
		{args: "MSET {a}1 v {b}2 w", special: true},
		{args: "DBSIZE", special: true},
		{args: "XINFO STREAM {a}s", addr: "m1:7000", slot: slotA},
		{args: "XINFO HELP", any: true},
	}
	for _, tc := range cases {
		args := argsOf(tc.args)
		// planned from the table, and from the policy's description of the command: alike
		for _, p := range []plan{c.plan(ctx, table, args), c.planDescribed(ctx, table, args, c.Describe(args))} {
			if p.addr != tc.addr || p.slot != tc.slot || (p.special != nil) != tc.special || p.anyMaster != tc.any || string(p.reply) != tc.reply {
				t.Errorf("%s: plan addr %q slot %d special %v any %v reply %q", tc.args, p.addr, p.slot, p.special != nil, p.anyMaster, p.reply)
			}
		}
	}

	// A write of two keys over two slots that Redis would refuse is refused the same way.
	rename := tableClusterWith(commandEntry("RENAME", 3, []string{"write"}, 1, 2, 1))
	rename.verified.Store(true)
	if p := rename.plan(ctx, rename.info.Load(), argsOf("RENAME {a}1 {b}2")); !strings.HasPrefix(string(p.reply), "-CROSSSLOT") {
		t.Errorf("RENAME over two slots: reply %q, want CROSSSLOT", p.reply)
	}

	// Standalone: every keyed command to the one server, whatever its slots.
	s := planCluster("solo:6379")
	for _, args := range []string{"GET {a}x", "MGET {a}1 {b}2"} {
		if p := s.plan(ctx, s.info.Load(), argsOf(args)); p.addr != "solo:6379" || p.special != nil {
			t.Errorf("standalone %s: addr %q special %v", args, p.addr, p.special != nil)
		}
	}

	// Until the pass-through user's ACL is verified, nothing passes.
	c.verified.Store(false)
	get := argsOf("GET {a}x")
	for _, p := range []plan{c.plan(ctx, table, get), c.planDescribed(ctx, table, get, c.Describe(get))} {
		if !strings.Contains(string(p.reply), errACLUnverified.Error()) {
			t.Errorf("unverified: reply %q", p.reply)
		}
	}
}

// TestDirect: what the event loop may forward itself: a command that goes whole to one node
// (its address and slot), never one that is split, merged or refused; DirectOf, from the
// policy's description of the command, routes it the same.
func TestDirect(t *testing.T) {
	c := planCluster("")
	for _, tc := range []struct {
		args string
		addr string
	}{
		{"GET {a}x", "m1:7000"},
		{"MGET {a}1 {b}2", ""},
		{"DBSIZE", ""},
	} {
		args := argsOf(tc.args)
		if addr, _ := c.Direct(args); addr != tc.addr {
			t.Errorf("Direct(%s) = %q, want %q", tc.args, addr, tc.addr)
		}
		// Routed from the policy's description, the same node and slot.
		a1, s1 := c.Direct(args)
		if a2, s2 := c.DirectOf(args, c.Describe(args)); a2 != a1 || s2 != s1 {
			t.Errorf("DirectOf(%s) = %q %d, Direct %q %d", tc.args, a2, s2, a1, s1)
		}
	}
	if addr, _ := (&Cluster{shared: &shared{}}).Direct(argsOf("GET k")); addr != "" {
		t.Errorf("with no command table: Direct = %q, want none", addr)
	}
	c.verified.Store(false)
	if addr, _ := c.DirectOf(argsOf("GET {a}x"), c.Describe(argsOf("GET {a}x"))); addr != "" {
		t.Errorf("unverified: DirectOf = %q, want none", addr)
	}
}
