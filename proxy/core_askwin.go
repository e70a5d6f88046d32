package proxy

import (
	"github.com/cespare/xxhash/v2"

	"seckill-proxy/internal/resp"
)

// What the core asks of Redis and has not read yet, in bytes. Redis bounds no normal
// client's output buffer: 2,000 connections that each pipelined 8 GETs of a 1 MiB value and
// never read made a master hold 3.8 GB of replies for the proxy's connections in 22 s (and
// 15 GB here in 6 s), although the proxy held only its own 40 MiB, since a master makes such
// replies faster than any reader takes them. So the core bounds the replies it has asked for
// and not read, in bytes, as a window (askWindow):
//   - each pass-through command is charged what its reply is expected to weigh: the size of the
//     last reply to the same command on the same key (a table of askSizes entries by hash,
//     that keeps nothing of the key itself), or askUnknown for one not seen;
//   - a command whose size is not known does not go while the same command on the same key is
//     out with its size unknown: the first reply teaches it (2,000 clients asking for one 1
//     MiB value at once ask Redis for it once, then by its size);
//   - past the window's bytes, a command waits (its client is not served, and is served again
//     when replies free room), unless nothing at all is out: one command always goes; a small
//     one (at most askSmall) has a quarter more room, so that the clients of small values are
//     not held behind those of large ones.
//
// So what a core has asked of Redis and not read is its window plus one reply, plus, at worst,
// one reply of every key read for the first time at once (what the data set holds). A reply
// is read as soon as it comes, whether or not its client reads it; the replies a proxy holds
// for clients are bounded by limits.reply_buffers (replybudget.go), and a client's own commands
// out by its window (window).

const (
	// askSizes is the number of entries of the table of reply sizes (a power of two).
	askSizes = 1 << 14
	// askUnknown is what a command whose reply has not been seen is charged.
	askUnknown = 1 << 10
	// askSmall is the largest charge that has the window's reserve.
	askSmall = 64 << 10
)

// askWindow is a core's bytes asked and not read. The zero value has no bound.
type askWindow struct {
	limit int64 // 0: no bound
	out   int64
	sizes [askSizes]askSize
	// unknown counts, by hash, the commands out whose reply size was not known when sent.
	unknown map[uint64]int32
	// waiting are the clients whose next command waits for room.
	waiting []*client
}

type askSize struct {
	hash uint64
	size int64
}

// askKey is the hash of a command's name, lower-cased, and its first argument (its key, for
// nearly every command that passes through as it is).
func askKey(args [][]byte) uint64 {
	var buf [64]byte
	var h xxhash.Digest // on the stack: a command costs no allocation here
	h.Reset()
	_, _ = h.Write(resp.AppendLower(buf[:0], args[0][:min(len(args[0]), 32)]))
	if len(args) > 1 {
		_, _ = h.WriteString("\x00")
		_, _ = h.Write(args[1])
	}
	return h.Sum64()
}

// ask is the charge for a command of hash h, and whether it may go now; unknown: its size
// was not known (release must be told).
func (w *askWindow) ask(h uint64) (charge int64, unknown, ok bool) {
	e := &w.sizes[h&(askSizes-1)]
	charge = askUnknown
	if e.hash == h && e.size > 0 {
		charge = e.size
	} else {
		if w.unknown[h] > 0 {
			return 0, true, false
		}
		unknown = true
	}
	if !w.room(charge) {
		return 0, unknown, false
	}
	w.out += charge
	if unknown {
		if w.unknown == nil {
			w.unknown = map[uint64]int32{}
		}
		w.unknown[h]++
	}
	return charge, unknown, true
}

// release gives back what a command of hash h was charged, and learns its reply's size (0:
// none to learn); true: clients wait, and the window is half empty or more: they may go now.
func (w *askWindow) release(h uint64, charge int64, unknown bool, size int) bool {
	w.out -= charge
	if unknown {
		if n := w.unknown[h] - 1; n > 0 {
			w.unknown[h] = n
		} else {
			delete(w.unknown, h)
		}
	}
	if size > 0 {
		w.sizes[h&(askSizes-1)] = askSize{hash: h, size: int64(size)}
	}
	return len(w.waiting) > 0 && (w.limit == 0 || w.out <= w.limit/2)
}

// may says whether a command of hash h may go now (ask would take it).
func (w *askWindow) may(h uint64) bool {
	e := &w.sizes[h&(askSizes-1)]
	charge := int64(askUnknown)
	if e.hash == h && e.size > 0 {
		charge = e.size
	} else if w.unknown[h] > 0 {
		return false
	}
	return w.room(charge)
}

// room: a command charged charge fits in the window now.
func (w *askWindow) room(charge int64) bool {
	limit := w.limit
	if charge <= askSmall {
		limit += w.limit / 4
	}
	return w.limit == 0 || w.out == 0 || w.out+charge <= limit
}

// wait counts c among the clients whose next command waits for room.
func (w *askWindow) wait(c *client) {
	if !c.askWaits {
		c.askWaits = true
		w.waiting = append(w.waiting, c)
	}
}

// wakeAsked marks every client that waits for room dirty, to be served again.
func (k *core) wakeAsked() {
	ws := k.asked.waiting
	k.asked.waiting = ws[:0]
	for _, c := range ws {
		c.askWaits = false
		if !c.closed {
			k.markDirty(c)
		}
	}
}
