package connect

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"seckill-proxy/conf"
)

// The cluster's best informed view of its masters. go-redis's loader asks one node at random
// for CLUSTER SLOTS and takes its answer: after a failover that node may not have seen the
// promotion yet, and go-redis goes on dialling the dead master until a later reload asks a
// better informed one. A Topology asks up to topologyAsk nodes at once for CLUSTER NODES and
// takes the best informed view, against which a client's map is checked (and reloaded again
// until it agrees: guard.Guard.ReloadSlots). It is not go-redis's loader itself: go-redis
// rewrites the loopback addresses a custom loader gives into ":port".
//   - a view that names a master this loader could not reach, or that it flags as failing,
//     loses to one that does not (the dead master is not taken back);
//   - then the view with the highest config epoch among its slot owners (a promotion raises
//     the promoted node's epoch);
//   - then the one that covers the most slots.
// A node that does not answer gives no view. Nodes flagged fail are left out of the map, as
// replicas too.

// topologyAsk is how many nodes one load asks.
const topologyAsk = 3

// Topology reads one cluster's view, from its configured addresses and the nodes of the last
// view. It is safe for concurrent use.
type Topology struct {
	c conf.Redis

	mu    sync.Mutex
	known []string // the nodes of the last map
}

// NewTopology returns the Topology of the cluster c configures.
func NewTopology(c conf.Redis) *Topology { return &Topology{c: c} }

// Masters are the addresses of the best informed view's masters that own slots, sorted.
func (t *Topology) Masters(ctx context.Context) ([]string, error) {
	slots, err := t.load(ctx)
	if err != nil {
		return nil, err
	}
	var out []string
	for _, s := range slots {
		out = append(out, s.Nodes[0].Addr)
	}
	slices.Sort(out)
	return slices.Compact(out), nil
}

// nodeClients are the small clients the loaders ask, one per node address and credentials,
// shared by every cluster client of the process (a reload comes every second or so).
var nodeClients struct {
	sync.Mutex
	m map[string]*redis.Client
}

func (t *Topology) client(addr string) *redis.Client {
	key := strings.Join([]string{addr, t.c.Username, t.c.Password, fmt.Sprint(t.c.AddressMap), t.c.DialTimeout.String()}, "\x00")
	nodeClients.Lock()
	defer nodeClients.Unlock()
	if c, ok := nodeClients.m[key]; ok {
		return c
	}
	if nodeClients.m == nil {
		nodeClients.m = map[string]*redis.Client{}
	}
	o := &redis.Options{Addr: addr, Username: t.c.Username, Password: t.c.Password, DialTimeout: t.c.DialTimeout,
		ReadTimeout: t.c.DialTimeout, WriteTimeout: t.c.DialTimeout, PoolSize: 1, MaxRetries: -1,
		Protocol: 2, DisableIdentity: true, ContextTimeoutEnabled: true}
	tc, err := RedisTLS(t.c)
	if m := conf.AddressMap(t.c.AddressMap); m != nil || tc != nil || err != nil {
		o.Dialer = Dialer{Timeout: t.c.DialTimeout, Map: m, TLS: tc, Err: err}.DialContext
	}
	c := redis.NewClient(o)
	nodeClients.m[key] = c
	return c
}

// load is the best informed view's slot map.
func (t *Topology) load(ctx context.Context) ([]redis.ClusterSlot, error) {
	t.mu.Lock()
	addrs := slices.Clone(t.known)
	t.mu.Unlock()
	rand.Shuffle(len(addrs), func(i, j int) { addrs[i], addrs[j] = addrs[j], addrs[i] })
	for _, a := range t.c.Addrs { // the configured seeds last: the map's own nodes know best
		if !slices.Contains(addrs, a) {
			addrs = append(addrs, a)
		}
	}
	ctx, cancel := context.WithTimeout(ctx, max(t.c.DialTimeout, time.Second))
	defer cancel()
	type answer struct {
		addr  string
		nodes []clusterNode
		err   error
	}
	var answers []answer
	unreachable := map[string]bool{}
	// Ask topologyAsk at a time, until enough have answered or every node was asked.
	for len(addrs) > 0 {
		batch := addrs[:min(topologyAsk, len(addrs))]
		addrs = addrs[len(batch):]
		got := make([]answer, len(batch))
		var wg sync.WaitGroup
		for i, a := range batch {
			wg.Go(func() {
				text, err := t.client(a).Do(ctx, "CLUSTER", "NODES").Text()
				got[i] = answer{addr: a, err: err}
				if err == nil {
					got[i].nodes, got[i].err = parseClusterNodes(text)
				}
			})
		}
		wg.Wait()
		for _, g := range got {
			if g.err != nil {
				unreachable[g.addr] = true
			}
			answers = append(answers, g)
		}
		if slices.ContainsFunc(answers, func(a answer) bool { return a.err == nil }) {
			break // a batch gave at least one view
		}
	}
	var views [][]clusterNode
	var errs []error
	for _, a := range answers {
		if a.err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", a.addr, a.err))
			continue
		}
		views = append(views, a.nodes)
	}
	if len(views) == 0 {
		return nil, fmt.Errorf("no node gave the cluster's topology: %w", errors.Join(errs...))
	}
	best := bestView(views, unreachable)
	slots, nodes := slotMap(best)
	t.mu.Lock()
	t.known = nodes
	t.mu.Unlock()
	return slots, nil
}

// clusterNode is one line of CLUSTER NODES.
type clusterNode struct {
	id, addr, master  string
	isMaster, failing bool
	epoch             int64
	slots             [][2]int
}

// parseClusterNodes reads CLUSTER NODES: "<id> <ip:port@cport[,hostname]> <flags> <master>
// <ping> <pong> <epoch> <link> <slot>...". Nodes with no address are left out, and slots being
// imported or migrated ("[...]") are not counted.
func parseClusterNodes(text string) ([]clusterNode, error) {
	var out []clusterNode
	for line := range strings.Lines(text) {
		f := strings.Fields(line)
		if len(f) == 0 {
			continue
		}
		if len(f) < 8 {
			return nil, fmt.Errorf("CLUSTER NODES line %q has %d fields, want 8 or more", clip(line), len(f))
		}
		addr, _, _ := strings.Cut(f[1], "@")
		addr, _, _ = strings.Cut(addr, ",")
		flags := strings.Split(f[2], ",")
		if strings.HasPrefix(addr, ":") || slices.Contains(flags, "noaddr") || slices.Contains(flags, "handshake") {
			continue
		}
		epoch, err := strconv.ParseInt(f[6], 10, 64)
		if err != nil {
			return nil, fmt.Errorf("CLUSTER NODES line %q: config epoch %q", clip(line), f[6])
		}
		n := clusterNode{id: f[0], addr: addr, master: f[3], epoch: epoch,
			isMaster: slices.Contains(flags, "master"),
			failing:  slices.Contains(flags, "fail") || slices.Contains(flags, "fail?")}
		for _, s := range f[8:] {
			if strings.HasPrefix(s, "[") {
				continue
			}
			lo, hi, isRange := strings.Cut(s, "-")
			if !isRange {
				hi = lo
			}
			a, err1 := strconv.Atoi(lo)
			b, err2 := strconv.Atoi(hi)
			if err1 != nil || err2 != nil || a < 0 || b > 16383 || a > b {
				return nil, fmt.Errorf("CLUSTER NODES line %q: slots %q", clip(line), s)
			}
			n.slots = append(n.slots, [2]int{a, b})
		}
		out = append(out, n)
	}
	if len(out) == 0 {
		return nil, errors.New("CLUSTER NODES named no node")
	}
	return out, nil
}

func clip(s string) string {
	if len(s) > 120 {
		return s[:120] + "..."
	}
	return strings.TrimSpace(s)
}

// bestView picks the best informed of views (see the top of this file).
func bestView(views [][]clusterNode, unreachable map[string]bool) []clusterNode {
	type score struct {
		dead  int   // slot owners unreachable or failing
		epoch int64 // the highest config epoch among the slot owners
		slots int   // slots covered by a live owner
	}
	scoreOf := func(v []clusterNode) score {
		var s score
		for _, n := range v {
			if !n.isMaster || len(n.slots) == 0 {
				continue
			}
			if n.failing || unreachable[n.addr] {
				s.dead++
				continue
			}
			s.epoch = max(s.epoch, n.epoch)
			for _, r := range n.slots {
				s.slots += r[1] - r[0] + 1
			}
		}
		return s
	}
	return slices.MaxFunc(views, func(a, b []clusterNode) int {
		sa, sb := scoreOf(a), scoreOf(b)
		if c := cmp.Compare(sb.dead, sa.dead); c != 0 { // fewer dead owners is better
			return c
		}
		if c := cmp.Compare(sa.epoch, sb.epoch); c != 0 {
			return c
		}
		return cmp.Compare(sa.slots, sb.slots)
	})
}

// slotMap is view as go-redis takes it: each slot range with its master first and then its
// replicas (those not failing), and the addresses of every node of the view.
func slotMap(view []clusterNode) ([]redis.ClusterSlot, []string) {
	var slots []redis.ClusterSlot
	var addrs []string
	for _, m := range view {
		addrs = append(addrs, m.addr)
		if !m.isMaster || len(m.slots) == 0 {
			continue
		}
		nodes := []redis.ClusterNode{{ID: m.id, Addr: m.addr}}
		for _, r := range view {
			if r.master == m.id && !r.failing {
				nodes = append(nodes, redis.ClusterNode{ID: r.id, Addr: r.addr})
			}
		}
		for _, rg := range m.slots {
			slots = append(slots, redis.ClusterSlot{Start: rg[0], End: rg[1], Nodes: nodes})
		}
	}
	slices.SortFunc(slots, func(a, b redis.ClusterSlot) int { return cmp.Compare(a.Start, b.Start) })
	return slots, addrs
}

// SlotOwner is the address of the master that owns slot in one node's CLUSTER NODES text,
// leaving out masters flagged failing; "" when none does (the node has not seen a promotion
// yet, say).
func SlotOwner(nodesText string, slot int) (string, error) {
	nodes, err := parseClusterNodes(nodesText)
	if err != nil {
		return "", err
	}
	for _, n := range nodes {
		if !n.isMaster || n.failing {
			continue
		}
		for _, r := range n.slots {
			if slot >= r[0] && slot <= r[1] {
				return n.addr, nil
			}
		}
	}
	return "", nil
}

// SlotReplica is SlotOwner's master and the address of a replica of it that is not flagged
// failing; replica is "" when the master has none.
func SlotReplica(nodesText string, slot int) (master, replica string, err error) {
	if master, err = SlotOwner(nodesText, slot); err != nil || master == "" {
		return master, "", err
	}
	replicas, err := Replicas(nodesText)
	if rs := replicas[master]; len(rs) > 0 {
		replica = rs[0]
	}
	return master, replica, err
}

// Replicas are, for each master of a CLUSTER NODES text that owns slots and is not flagged
// failing, the addresses of its replicas not flagged failing (none: an empty list).
func Replicas(nodesText string) (map[string][]string, error) {
	nodes, err := parseClusterNodes(nodesText)
	if err != nil {
		return nil, err
	}
	out := map[string][]string{}
	byID := map[string]string{}
	for _, n := range nodes {
		if n.isMaster && !n.failing && len(n.slots) > 0 {
			out[n.addr] = []string{}
			byID[n.id] = n.addr
		}
	}
	for _, n := range nodes {
		if m, ok := byID[n.master]; ok && !n.isMaster && !n.failing && n.addr != m { // a stale line at the master's own address is not a replica
			out[m] = append(out[m], n.addr)
		}
	}
	return out, nil
}
