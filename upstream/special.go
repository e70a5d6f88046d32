package upstream

import (
	"bytes"
	"context"
	"strconv"
	"strings"
	"sync"

	"go.uber.org/zap"

	"seckill-proxy/internal/resp"
)

// Slot is the Redis Cluster slot of key: CRC16 (XMODEM) of the key, or of its hash tag, the
// part between the first '{' and the next '}' when that part is not empty, modulo 16384.
func Slot(key []byte) uint16 {
	if s := bytes.IndexByte(key, '{'); s >= 0 {
		if e := bytes.IndexByte(key[s+1:], '}'); e > 0 {
			key = key[s+1 : s+1+e]
		}
	}
	var crc uint16
	for _, b := range key {
		crc = crc<<8 ^ crc16Table[byte(crc>>8)^b]
	}
	return crc % 16384
}

// crc16Table is CRC16 (XMODEM, polynomial 0x1021) of each byte value, as Redis's crc16.c
// tabulates it: one lookup per key byte instead of eight shifts.
var crc16Table = func() (t [256]uint16) {
	for i := range t {
		crc := uint16(i) << 8
		for range 8 {
			if crc&0x8000 != 0 {
				crc = crc<<1 ^ 0x1021
			} else {
				crc <<= 1
			}
		}
		t[i] = crc
	}
	return t
}()

// one sends one command to addr and returns its reply, following MOVED and ASK.
func (c *Cluster) one(ctx context.Context, addr string, args [][]byte) []byte {
	replies, err := c.node(addr).do(ctx, [][][]byte{args})
	if err != nil {
		return unavailable(err)
	}
	return c.redirect(ctx, replies[0], args)
}

// split runs a multi-key command per slot and merges the replies as Redis would answer the
// whole: MGET's values in the keys' order, MSET's OK, the sum of DEL, UNLINK, EXISTS and TOUCH.
func (c *Cluster) split(ctx context.Context, name string, args [][]byte) []byte {
	step := 1
	if name == "mset" {
		step = 2
		if (len(args)-1)%2 != 0 {
			return errorReply("ERR wrong number of arguments for 'mset' command")
		}
	}
	type part struct {
		pos  []int // positions of the keys in the original command
		args [][]byte
	}
	parts := map[uint16]*part{}
	var order []uint16
	for i := 1; i < len(args); i += step {
		s := Slot(args[i])
		p, ok := parts[s]
		if !ok {
			p = &part{args: [][]byte{args[0]}}
			parts[s] = p
			order = append(order, s)
		}
		p.pos = append(p.pos, (i-1)/step)
		p.args = append(p.args, args[i:i+step]...)
	}
	replies := make([][]byte, len(order))
	for j, s := range order {
		p := parts[s]
		addr, err := c.masterAddr(ctx, p.args[1])
		if err != nil {
			return unavailable(err)
		}
		replies[j] = c.one(ctx, addr, p.args)
		if replies[j][0] == '-' {
			return replies[j]
		}
	}
	switch name {
	case "mget":
		values := make([][]byte, (len(args)-1)/step)
		for j, s := range order {
			els, err := resp.SplitArray(replies[j])
			if err != nil || len(els) != len(parts[s].pos) {
				return errorReply("ERR upstream MGET reply did not match its keys")
			}
			for k, pos := range parts[s].pos {
				values[pos] = els[k]
			}
		}
		return arrayReply(values)
	case "mset":
		return []byte("+OK\r\n")
	}
	var sum int64
	for _, r := range replies {
		n, err := strconv.ParseInt(strings.TrimSpace(string(r[1:])), 10, 64)
		if err != nil || r[0] != ':' {
			return errorReply("ERR upstream " + strings.ToUpper(name) + " reply was not an integer")
		}
		sum += n
	}
	return []byte(":" + strconv.FormatInt(sum, 10) + "\r\n")
}

// sumOverMasters answers DBSIZE: the sum over the masters.
func (c *Cluster) sumOverMasters(ctx context.Context, args [][]byte) []byte {
	ms, err := c.masters(ctx)
	if err != nil {
		return unavailable(err)
	}
	var sum int64
	for _, m := range ms {
		r := c.one(ctx, m, args)
		if r[0] != ':' {
			return r
		}
		n, _ := strconv.ParseInt(strings.TrimSpace(string(r[1:])), 10, 64)
		sum += n
	}
	return []byte(":" + strconv.FormatInt(sum, 10) + "\r\n")
}

// scan walks every master in turn. The proxy's cursor holds the master's index and that
// master's own cursor: cursor = own*masters + index; 0 starts and ends the walk.
func (c *Cluster) scan(ctx context.Context, args [][]byte) []byte {
	if len(args) < 2 {
		return errorReply("ERR wrong number of arguments for 'scan' command")
	}
	cursor, err := strconv.ParseUint(string(args[1]), 10, 64)
	if err != nil {
		return errorReply("ERR invalid cursor")
	}
	ms, err := c.masters(ctx)
	if err != nil {
		return unavailable(err)
	}
	k := uint64(len(ms))
	idx, own := cursor%k, cursor/k
	sub := append([][]byte{args[0], []byte(strconv.FormatUint(own, 10))}, args[2:]...)
	r := c.one(ctx, ms[idx], sub)
	els, err := resp.SplitArray(r)
	if err != nil || len(els) != 2 {
		return r
	}
	next, err := strconv.ParseUint(string(bulkValue(els[0])), 10, 64)
	if err != nil {
		return errorReply("ERR upstream SCAN cursor")
	}
	var out uint64
	switch {
	case next != 0:
		out = next*k + idx
	case idx+1 < k:
		out = idx + 1
	}
	cur := strconv.FormatUint(out, 10)
	return arrayReply([][]byte{[]byte("$" + strconv.Itoa(len(cur)) + "\r\n" + cur + "\r\n"), els[1]})
}

// bulkValue is the value of a raw bulk string reply.
func bulkValue(raw []byte) []byte {
	i := bytes.IndexByte(raw, '\n')
	if i < 0 || len(raw) < i+3 {
		return nil
	}
	return raw[i+1 : len(raw)-2]
}

// broadcast names the commands (and, for containers, subcommands) that act on a whole server:
// they go to every master, and the replies are merged as a cluster client merges them.
// Anything else of a container (FUNCTION LIST, CONFIG GET, ...) reads one master.
var broadcast = map[string]map[string]bool{
	"flushall": nil, "flushdb": nil, "save": nil, "bgsave": nil, "bgrewriteaof": nil,
	"script":   {"load": true, "exists": true, "flush": true, "kill": true},
	"function": {"load": true, "delete": true, "flush": true, "restore": true, "kill": true},
	"config":   {"set": true, "resetstat": true},
}

// isBroadcast says whether args goes to every master.
func isBroadcast(name string, args [][]byte) bool {
	subs, ok := broadcast[name]
	if !ok {
		return false
	}
	return subs == nil || (len(args) > 1 && subs[strings.ToLower(string(args[1]))])
}

// everyMaster runs a command that acts on a whole server on every master, and merges the
// replies: SCRIPT EXISTS answers 1 for a script only if every master has it; SCRIPT KILL and
// FUNCTION KILL succeed if any master had a script to kill (NOTBUSY only if none had);
// anything else answers the first master's reply when every master succeeded, and otherwise
// the first error as Redis wrote it (a client matches Redis's text), with the masters that
// failed and the count that did it in the log.
func (c *Cluster) everyMaster(ctx context.Context, args [][]byte) []byte {
	ms, replies, err := c.OnEveryMaster(ctx, args)
	if err != nil {
		return unavailable(err)
	}
	sub := ""
	if len(args) > 1 {
		sub = strings.ToLower(string(args[1]))
	}
	switch {
	case sub == "exists":
		return mergeExists(replies)
	case sub == "kill":
		for _, r := range replies {
			if r[0] != '-' {
				return r
			}
		}
		for _, r := range replies {
			if !bytes.HasPrefix(r, []byte("-NOTBUSY")) {
				return r
			}
		}
		return replies[0]
	}
	var failed []string
	var first []byte
	for i, r := range replies {
		if r[0] == '-' {
			if first == nil {
				first = r
			}
			failed = append(failed, ms[i])
		}
	}
	switch {
	case first == nil:
		return replies[0]
	case len(ms) == 1:
		return first
	}
	c.opt.Log.Warn("a whole-server command failed on some masters; the client got the first error",
		zap.String("command", strings.ToUpper(string(args[0]))+" "+sub), zap.String("error", strings.TrimSuffix(string(first[1:]), "\r\n")),
		zap.Strings("failed_on", failed), zap.Int("done_on", len(ms)-len(failed)), zap.Int("masters", len(ms)))
	return first
}

// mergeExists merges SCRIPT EXISTS replies: 1 for a script only if every master has it.
func mergeExists(replies [][]byte) []byte {
	var merged [][]byte
	for _, r := range replies {
		if r[0] == '-' {
			return r
		}
		els, err := resp.SplitArray(r)
		if err != nil {
			return r
		}
		if merged == nil {
			merged = els
			continue
		}
		for i := range merged {
			if i < len(els) && string(els[i]) == ":0\r\n" {
				merged[i] = els[i]
			}
		}
	}
	return arrayReply(merged)
}

// OnEveryMaster sends args to every master (the one server, standalone) and returns each
// master's address and raw reply, in the same order.
func (c *Cluster) OnEveryMaster(ctx context.Context, args [][]byte) ([]string, [][]byte, error) {
	ms, err := c.masters(ctx)
	if err != nil {
		return nil, nil, err
	}
	replies := make([][]byte, len(ms))
	var wg sync.WaitGroup
	for i, m := range ms {
		wg.Go(func() { replies[i] = c.one(ctx, m, args) })
	}
	wg.Wait()
	return ms, replies, nil
}
