package upstream

import (
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
	"go.uber.org/zap"

	"seckill-proxy/conf"
	"seckill-proxy/internal/connect"
)

// Options configure a Cluster.
type Options struct {
	// ConnsPerNode is how many shared connections carry each node's ordinary commands.
	ConnsPerNode int
	// SpareConns is how many connections to each node are kept dialled and idle for the
	// commands that take a connection of their own (see spares).
	SpareConns int
	// OwnerLanes is how many buy connections a core may open to each master (conf.Redis).
	OwnerLanes int
	// Timeout bounds one batch to one node (a blocking command gets its own timeout plus
	// this).
	Timeout     time.Duration
	DialTimeout time.Duration
	// AddressMap sends a node's announced address to the address to dial (see
	// conf.Redis.AddressMap).
	AddressMap map[string]string
	// TLS makes every connection a TLS one (conf.Redis.TLS); TLSErr fails every dial.
	TLS    *tls.Config
	TLSErr error
	// Username and Password log every pass-through connection in: a Redis ACL user that may
	// not write the sales' keys (see VerifyACL).
	Username string
	Password string
	// MaxOwn bounds the connections that blocking commands, transactions and subscribers
	// hold at once (0: none), and OwnShare those on each master as a share of its
	// maxclients (0: none); see own.go.
	MaxOwn   int
	OwnShare float64
	// Restricted says Username is such a user; without one the proxy refuses scripts.
	Restricted bool
	// OwnerUsername and OwnerPassword log in the connections that carry the proxy's own
	// calls (an event loop's buy scripts): a user that may write the sales' keys.
	OwnerUsername, OwnerPassword string
	// Standalone is the address of a plain Redis server to send everything to, instead of a
	// cluster: no slots, no CROSSSLOT, no splitting.
	Standalone string
	// Protocol is 3 for connections that log in with HELLO 3 (see RESP3); else RESP2.
	Protocol int
	// KeysMax is the most keys a KEYS reply may name (0: no bound); see keys.
	KeysMax int
	// Log gets what a client's reply leaves out: which masters refused a whole-server command
	// that the others did. Nil logs nothing.
	Log *zap.Logger
}

// Cluster passes commands through to a Redis Cluster. Its slot map is go-redis's (reloaded
// about every second, and on MOVED). It is safe for concurrent use.
type Cluster struct {
	rc  *redis.ClusterClient
	opt Options

	mu sync.Mutex // guards making nodes
	// loaded are the keyless EVALs' scripts loaded on every master (keyless.go).
	loaded loadedScripts
	nodes  sync.Map // addr -> *node
	*shared
	// resp3 is the sibling whose connections speak RESP3 (made on first use); a RESP3
	// sibling's own is nil.
	resp3     *Cluster
	resp3Once sync.Once
}

// shared is what a Cluster and its RESP3 sibling share.
type shared struct {
	info atomic.Pointer[commandTable]
	// verified is set once CheckACL has verified the pass-through user; until then every
	// pass-through command is answered UNAVAILABLE.
	verified atomic.Bool
	slotCache
	// own bounds the connections held by blocking commands, transactions and subscribers.
	own ownSlots
}

// RESP3 is the Cluster whose connections log in with HELLO 3, so that Redis's replies come in
// RESP3 for clients that asked for it: its own shared connections, transactions, blocking
// commands and subscriptions, on the same slot map, command table and ACL check.
func (c *Cluster) RESP3() *Cluster {
	if c.opt.Protocol == 3 {
		return c
	}
	c.resp3Once.Do(func() {
		opt := c.opt
		opt.Protocol = 3
		c.resp3 = &Cluster{rc: c.rc, opt: opt, shared: c.shared}
	})
	return c.resp3
}

// For is the Cluster for a client speaking protocol proto (2 or 3).
func (c *Cluster) For(proto int) *Cluster {
	if proto == 3 {
		return c.RESP3()
	}
	return c
}

// commandTable is Redis's COMMAND INFO, and for the commands routed plainly by their
// positional keys, their flags, worked out once.
type commandTable struct {
	info  map[string]*redis.CommandInfo
	plain map[string]commandFlags
}

// commandFlags are what routing needs of a command's COMMAND INFO (ci nil: Redis does not
// know the command).
type commandFlags struct {
	ci       *redis.CommandInfo
	readOnly bool
	blocking bool
}

func flagsOf(ci *redis.CommandInfo) commandFlags {
	if ci == nil {
		return commandFlags{}
	}
	return commandFlags{ci: ci, readOnly: ci.ReadOnly || hasFlag(ci, "readonly"), blocking: hasFlag(ci, "blocking")}
}

func newCommandTable(info map[string]*redis.CommandInfo) *commandTable {
	t := &commandTable{info: info, plain: make(map[string]commandFlags, len(info))}
	for name, ci := range info {
		if servedSpecially[ci.Name] || hasFlag(ci, "movablekeys") || len(ci.Flags) == 0 {
			continue
		}
		t.plain[name] = flagsOf(ci)
	}
	return t
}

// New returns a Cluster on rc's slot map.
func New(rc *redis.ClusterClient, opt Options) *Cluster {
	if opt.Log == nil {
		opt.Log = zap.NewNop()
	}
	c := &Cluster{rc: rc, opt: opt, shared: &shared{}}
	c.own = ownSlots{max: opt.MaxOwn, share: opt.OwnShare, maxClients: c.nodeMaxClients}
	return c
}

// FromConf returns a Cluster configured by c, logging to log.
func FromConf(rc *redis.ClusterClient, c conf.Redis, log *zap.Logger) *Cluster {
	opt := Options{ConnsPerNode: c.PassthroughConns, SpareConns: c.SpareConns, OwnerLanes: c.OwnerLanes, Timeout: c.CommandTimeout, DialTimeout: c.DialTimeout,
		Username: c.Username, Password: c.Password, OwnerUsername: c.Username, OwnerPassword: c.Password,
		AddressMap: conf.AddressMap(c.AddressMap), Log: log, MaxOwn: c.MaxOwnConns, OwnShare: c.OwnConnsShare, KeysMax: c.KeysMax}
	opt.TLS, opt.TLSErr = connect.RedisTLS(c)
	if c.PassthroughUsername != "" {
		opt.Username, opt.Password, opt.Restricted = c.PassthroughUsername, c.PassthroughPassword, true
	}
	if c.Mode == conf.ModeStandalone {
		opt.Standalone = c.Addrs[0]
	}
	return New(rc, opt)
}

// Close stops the shared connections, its RESP3 sibling's too.
func (c *Cluster) Close() {
	if c.resp3 != nil {
		c.resp3.Close()
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.nodes.Range(func(_, n any) bool {
		n.(*node).close()
		return true
	})
}

func (c *Cluster) node(addr string) *node {
	if n, ok := c.nodes.Load(addr); ok {
		return n.(*node)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	v, ok := c.nodes.Load(addr)
	n, _ := v.(*node)
	if !ok {
		n = newNode(addr, c.opt.ConnsPerNode, c.opt.dialer(), loginCommand(c.opt.Protocol, c.opt.Username, c.opt.Password),
			c.opt.SpareConns, c.opt.DialTimeout+c.opt.Timeout, c.opt.Log)
		c.nodes.Store(addr, n)
	}
	return n
}

// commands returns the command table, loading Redis's COMMAND INFO on first use with the
// context ctx makes.
func (c *Cluster) commands(ctx func() context.Context) (*commandTable, error) {
	if t := c.info.Load(); t != nil {
		return t, nil
	}
	reply, err := c.rc.Do(ctx(), "COMMAND").Slice()
	if err != nil {
		return nil, err
	}
	info := parseCommands(reply)
	t := newCommandTable(info)
	c.info.Store(t)
	return t, nil
}

func unavailable(err error) []byte {
	if busy := (*ErrTooManyOwn)(nil); errors.As(err, &busy) {
		return errorReply(busy.Error())
	}
	return errorReply("UNAVAILABLE " + strings.ReplaceAll(err.Error(), "\r\n", " "))
}

// Do passes one client's pipeline of commands through, in order, and returns one raw reply
// per command. The router has decided that they may run.
func (c *Cluster) Do(ctx context.Context, cmds [][][]byte) [][]byte {
	return c.DoDescribed(ctx, cmds, nil)
}

// DoDescribed is Do for commands the policy described (descs[i], from Describe, is cmds[i]'s;
// descs may be nil): one routed plainly by its keys is routed from its description.
func (c *Cluster) DoDescribed(ctx context.Context, cmds [][][]byte, descs []Description) [][]byte {
	b := batch{Cluster: c, parent: ctx, deadline: time.Now().Add(c.opt.Timeout)}
	defer b.close()
	out := make([][]byte, len(cmds))
	table, err := c.commands(b.timed)
	if err != nil {
		for i := range out {
			out[i] = unavailable(err)
		}
		return out
	}
	// Runs of plainly routed commands go out together, a batch per node; anything else runs
	// alone, after the run before it, so that effects keep the client's order.
	run := make([]routed, 0, len(cmds))
	for i, args := range cmds {
		var d Description
		if i < len(descs) {
			d = descs[i]
		}
		p := c.planDescribed(ctx, table, args, d)
		if p.anyMaster {
			if p.addr, err = c.anyMaster(ctx); err != nil {
				p.reply = unavailable(err)
			}
		}
		if p.reply != nil {
			b.doRouted(run, out)
			run = run[:0]
			out[i] = p.reply
			continue
		}
		if p.special != nil {
			b.doRouted(run, out)
			run = run[:0]
			if p.ownDeadline {
				out[i] = p.special(b.parent)
			} else {
				out[i] = p.special(b.timed())
			}
			continue
		}
		run = append(run, routed{i: i, addr: p.addr, args: args})
	}
	b.doRouted(run, out)
	return out
}

// batch is one client pipeline on its way through Do. Plainly routed commands carry its
// deadline to their lane as a value; a context with a timer is made only for the paths that
// need one (specials, redirects), since making one per pipeline costs more than routing it.
type batch struct {
	*Cluster
	parent   context.Context
	deadline time.Time
	ctx      context.Context
	cancel   context.CancelFunc
}

func (b *batch) timed() context.Context {
	if b.ctx == nil {
		b.ctx, b.cancel = context.WithDeadline(b.parent, b.deadline)
	}
	return b.ctx
}

func (b *batch) close() {
	if b.cancel != nil {
		b.cancel()
	}
}

type routed struct {
	i    int
	addr string
	args [][]byte
}

// doRouted sends each node its commands as one batch, the nodes in parallel, and follows
// MOVED and ASK one by one.
func (b *batch) doRouted(run []routed, out [][]byte) {
	if len(run) == 0 {
		return
	}
	send := func(addr string, rs []routed) {
		cmds := make([][][]byte, len(rs))
		for i, r := range rs {
			cmds[i] = r.args
		}
		replies, err := b.node(addr).doUntil(b.parent, b.deadline, cmds)
		for i, r := range rs {
			switch {
			case err != nil:
				out[r.i] = unavailable(err)
			case isRedirect(replies[i]):
				out[r.i] = b.redirect(b.timed(), replies[i], r.args)
			default:
				out[r.i] = replies[i]
			}
		}
	}
	single := true
	for _, r := range run[1:] {
		if r.addr != run[0].addr {
			single = false
			break
		}
	}
	if single { // the common case: no goroutine, no map
		send(run[0].addr, run)
		return
	}
	byNode := map[string][]routed{}
	for _, r := range run {
		byNode[r.addr] = append(byNode[r.addr], r)
	}
	var wg sync.WaitGroup
	b.timed() // made before the goroutines, which may all need it for a redirect
	for addr, rs := range byNode {
		wg.Go(func() { send(addr, rs) })
	}
	wg.Wait()
}

func isRedirect(reply []byte) bool {
	return bytes.HasPrefix(reply, []byte("-MOVED ")) || bytes.HasPrefix(reply, []byte("-ASK "))
}

// redirect follows a MOVED or ASK reply (twice at most); any other reply is returned as is.
func (c *Cluster) redirect(ctx context.Context, reply []byte, args [][]byte) []byte {
	return c.redirectVia(ctx, reply, args, func(ctx context.Context, addr string, cmds [][][]byte) ([][]byte, error) {
		return c.node(addr).do(ctx, cmds)
	})
}

// redirectVia is redirect with the commands sent by send.
func (c *Cluster) redirectVia(ctx context.Context, reply []byte, args [][]byte, send func(ctx context.Context, addr string, cmds [][][]byte) ([][]byte, error)) []byte {
	for hop := 0; hop < 2; hop++ {
		moved := bytes.HasPrefix(reply, []byte("-MOVED "))
		ask := bytes.HasPrefix(reply, []byte("-ASK "))
		if !moved && !ask {
			return reply
		}
		fields := strings.Fields(string(reply[1:]))
		if len(fields) != 3 {
			return reply
		}
		addr := fields[2]
		cmds := [][][]byte{args}
		if moved {
			c.rc.ReloadState(ctx)
			c.slotCache.forget()
		} else {
			cmds = [][][]byte{{[]byte("ASKING")}, args}
		}
		replies, err := send(ctx, addr, cmds)
		if err != nil {
			return unavailable(err)
		}
		reply = replies[len(replies)-1]
	}
	return reply
}

// masterAddr is the address of the master that owns key's slot.
func (c *Cluster) masterAddr(ctx context.Context, key []byte) (string, error) {
	if c.opt.Standalone != "" {
		return c.opt.Standalone, nil
	}
	return c.slotMaster(ctx, Slot(key), key)
}

// slotMaster is the address of the master of slot, key's: from the slot cache, or from
// go-redis's slot map, which the cache then holds for up to slotCacheAge.
func (c *Cluster) slotMaster(ctx context.Context, slot uint16, key []byte) (string, error) {
	if addr, ok := c.slotCache.get(slot); ok {
		return addr, nil
	}
	m, err := c.rc.MasterForKey(ctx, string(key))
	if err != nil {
		return "", err
	}
	addr := m.Options().Addr
	c.slotCache.put(slot, addr)
	return addr, nil
}

// masters lists the masters' addresses, sorted, so that a SCAN cursor means the same node
// each time.
func (c *Cluster) masters(ctx context.Context) ([]string, error) {
	if c.opt.Standalone != "" {
		return []string{c.opt.Standalone}, nil
	}
	var mu sync.Mutex
	var addrs []string
	err := c.rc.ForEachMaster(ctx, func(_ context.Context, m *redis.Client) error {
		mu.Lock()
		addrs = append(addrs, m.Options().Addr)
		mu.Unlock()
		return nil
	})
	if err != nil {
		return nil, err
	}
	slices.Sort(addrs)
	return addrs, nil
}

func arrayReply(els [][]byte) []byte {
	b := []byte("*" + strconv.Itoa(len(els)) + "\r\n")
	for _, e := range els {
		b = append(b, e...)
	}
	return b
}
