package proxy_test

import (
	"context"
	"net"
	"strconv"
	"strings"
	"testing"
	"time"

	"seckill-proxy/conf"
)

// TestReplyBuffersBounded: clients that pipeline reads of a large value and never read the
// replies are disconnected once the proxy holds more than limits.reply_buffers of them, and
// each such client has only a few reads out at Redis at a time (its window shrinks to the
// replies' size); a client that reads its replies, large ones included, is served meanwhile.
func TestReplyBuffersBounded(t *testing.T) {
	const limit = 4 << 20
	s := start(t, func(c *conf.Config) { c.Limits.ReplyBuffers = limit })
	ctx := context.Background()
	rc := s.client(t, 2)
	key := "replybudget:" + newSKU("v")
	value := strings.Repeat("v", 512<<10)
	if err := rc.Set(ctx, key, value, time.Minute).Err(); err != nil {
		t.Fatal(err)
	}
	get := []byte("*2\r\n$3\r\nGET\r\n$" + strconv.Itoa(len(key)) + "\r\n" + key + "\r\n")
	batch := []byte(strings.Repeat(string(get), 64))
	var attackers []net.Conn
	for range 24 {
		c, err := net.Dial("tcp", s.addr)
		if err != nil {
			t.Fatal(err)
		}
		_ = c.(*net.TCPConn).SetReadBuffer(4096)
		t.Cleanup(func() { _ = c.Close() })
		attackers = append(attackers, c)
		go func() {
			for {
				_ = c.SetWriteDeadline(time.Now().Add(20 * time.Second))
				if _, err := c.Write(batch); err != nil {
					return
				}
			}
		}()
	}
	eventually(t, 20*time.Second, "clients that never read disconnected", func() bool { return s.field("reply_buffers_disconnects") > 0 })
	// The event loops disconnect at once; a client served by a goroutine of its own (event
	// loops 0) has replyGrace to take its write.
	eventually(t, 10*time.Second, "unread replies back within twice the bound", func() bool { return s.field("reply_buffers") <= 2*limit })
	for i := range 20 {
		v, err := rc.Get(ctx, key).Result()
		if err != nil || v != value {
			t.Fatalf("read %d of the large value by a client that reads: %d bytes, %v", i, len(v), err)
		}
	}
	eventually(t, 10*time.Second, "unread replies still within twice the bound", func() bool { return s.field("reply_buffers") <= 2*limit })
	for _, c := range attackers {
		_ = c.Close()
	}
	eventually(t, 10*time.Second, "the unread replies let go", func() bool { return s.field("reply_buffers") < 1<<20 })
}
