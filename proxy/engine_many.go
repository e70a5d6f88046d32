package proxy

import (
	"bytes"
	"strconv"

	"seckill-proxy/guard"
	"seckill-proxy/internal/resp"
)

// Calls of many SKUs. A turn's buys for one master that span SKUs (or stock buckets) go as
// one call of buymany.lua, not one call per SKU: Redis runs each SKU's buys as buy.lua would
// alone, one SKU after the other, and answers a value per SKU. The call is one write on the
// owner connection, followed by the node's WAIT like any call, and each SKU's value settles
// its buys as a call of its own would. A SKU whose keys were not all on the master (its slot
// moved, or is moving) answers NOTHERE, wrote nothing, and its buys go again, alone, where
// MOVED and ASK are followed as usual. An error for the whole call is what each group's call
// alone would have been answered, and settles each group as such.

// merge is the calls a node's turn writes: the calls that may share (not after ASKING, not
// sent alone, not EVAL after a NOSCRIPT) go as calls of many groups, at most
// guard.MaxGroupsPerCall groups and guard.MaxBuysPerManyCall buys each; the others as they
// are. A call of one group stays a plain call, and so do the calls of a turn that has one
// group only (a hot SKU's 64 buys a call): one call of them all would make Redis's work no
// less, and its answer come later (measured: 0.78 against 0.84 of the seeds' orders/s).
func (e *engine) merge(nc *nodeCalls) []*buyCall {
	if nc.ask || len(nc.calls) < 2 || !manyGroups(nc.calls) {
		return nc.calls
	}
	out := make([]*buyCall, 0, len(nc.calls))
	var many *buyCall
	buys := 0
	done := func() {
		switch {
		case many == nil:
		case len(many.parts) == 1:
			out = append(out, many.parts[0])
		default:
			out = append(out, many)
		}
		many, buys = nil, 0
	}
	for _, call := range nc.calls {
		b := call.buys[0]
		if b.alone || b.a.Group().Eval {
			out = append(out, call)
			continue
		}
		if many != nil && (len(many.parts) == guard.MaxGroupsPerCall || buys+len(call.buys) > guard.MaxBuysPerManyCall) {
			done()
		}
		if many == nil {
			many = &buyCall{}
		}
		many.parts = append(many.parts, call)
		buys += len(call.buys)
	}
	done()
	return out
}

// manyGroups: calls, which may share, are of two groups or more.
func manyGroups(calls []*buyCall) bool {
	first := calls[0].buys[0].a.Group()
	for _, c := range calls[1:] {
		if c.buys[0].a.Group() != first {
			return true
		}
	}
	return false
}

// appendCall appends call, to the master at addr, to out: its buys as one script call, or
// its parts' as one call of many groups (as EVAL when that script's EVALSHA answered NOSCRIPT
// on that master).
func (e *engine) appendCall(out []byte, addr string, call *buyCall) []byte {
	if call.parts == nil {
		return e.buyer.AppendCall(out, [][]*guard.Attempt{attemptsOf(call)}, false)
	}
	groups := make([][]*guard.Attempt, len(call.parts))
	for i, p := range call.parts {
		groups[i] = attemptsOf(p)
	}
	eval := e.manyEval[addr]
	if eval {
		delete(e.manyEval, addr)
	}
	return e.buyer.AppendCall(out, groups, eval)
}

// attemptsOf are the attempts of call's buys.
func attemptsOf(call *buyCall) []*guard.Attempt {
	as := make([]*guard.Attempt, len(call.buys))
	for i, b := range call.buys {
		as[i] = b.a
	}
	return as
}

// manyReply takes the reply of a call of many groups. An error is Redis's answer to the whole
// call, which it would have given each group's call alone (the script is not loaded, the node
// is loading or a replica, a script is busy...): each part takes it as its reply, and after
// NOSCRIPT the next call of many groups to that master goes as EVAL. Otherwise each part takes
// its value as a call's reply, or, for NOTHERE, goes again alone.
func (e *engine) manyReply(call *buyCall, raw []byte) {
	if call.out != nil && bytes.HasPrefix(raw, []byte("-NOSCRIPT ")) {
		if e.manyEval == nil {
			e.manyEval = map[string]bool{}
		}
		e.manyEval[call.out.addr] = true
	}
	e.callOver(call)
	if len(raw) > 0 && raw[0] == '-' {
		for _, p := range call.parts {
			e.callReply(p, raw)
		}
		return
	}
	vals, err := resp.SplitArray(raw)
	if err != nil || len(vals) != len(call.parts) {
		bad := []byte("-ERR buymany.lua answered " + strconv.Itoa(len(vals)) + " values for " + strconv.Itoa(len(call.parts)) + " groups\r\n")
		for _, p := range call.parts {
			e.callReply(p, bad)
		}
		return
	}
	for i, p := range call.parts {
		if guard.NotHere(vals[i]) {
			e.again(p)
			continue
		}
		e.callReply(p, vals[i])
	}
}

// again sends a part's buys once more with the next turn's, alone; a part whose buyers were
// answered already (its deadline passed) just ends: nothing of it ran.
func (e *engine) again(call *buyCall) {
	if call.answered {
		e.buyer.Late(attemptsOf(call), nil, false)
		e.forget(call)
		return
	}
	for _, b := range call.buys {
		b.alone = true
		e.buys = append(e.buys, b)
	}
}
