// Package upstream passes commands through to the Redis Cluster and returns Redis's replies
// as raw RESP, byte for byte, so that a client sees exactly what Redis said: simple versus
// bulk strings, null bulk versus empty or null array, nested arrays, error text.
//
// It routes by key slot, splits the multi-key commands that Redis Cluster allows to be split,
// follows MOVED and ASK, runs blocking commands on connections of their own, and refuses what
// a shared proxy must not run. It does not serve SECKILL commands (router and guard do).
package upstream

import (
	"strconv"

	"seckill-proxy/internal/resp"
)

// ErrProtocol is a malformed reply from upstream (internal/resp reads them all).
var ErrProtocol = resp.ErrReply

// appendCommand appends args as a RESP array of bulk strings.
func appendCommand(b []byte, args [][]byte) []byte {
	b = append(b, '*')
	b = strconv.AppendInt(b, int64(len(args)), 10)
	b = append(b, '\r', '\n')
	for _, a := range args {
		b = append(b, '$')
		b = strconv.AppendInt(b, int64(len(a)), 10)
		b = append(b, '\r', '\n')
		b = append(b, a...)
		b = append(b, '\r', '\n')
	}
	return b
}

// errorReply renders msg as a RESP error.
func errorReply(msg string) []byte { return []byte("-" + msg + "\r\n") }
