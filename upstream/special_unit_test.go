package upstream

import (
	"bytes"
	"errors"
	"fmt"
	"strings"
	"testing"
)

// TestIsBroadcast: what acts on a whole server goes to every master; a container's other
// subcommands, and a container with no subcommand, read one.
func TestIsBroadcast(t *testing.T) {
	for _, c := range []struct {
		cmd  string
		want bool
	}{
		{"flushall", true}, {"flushall async", true}, {"flushdb", true}, {"bgsave", true},
		{"script load x", true}, {"script LOAD x", true}, {"script exists a b", true},
		{"script flush", true}, {"script kill", true}, {"script debug yes", false}, {"script", false},
		{"function load x", true}, {"function delete f", true}, {"function list", false},
		{"function dump", false}, {"config set a b", true}, {"config resetstat", true},
		{"config get a", false}, {"config rewrite", false}, {"get k", false}, {"dbsize", false},
	} {
		args := argsOf(c.cmd)
		if got := isBroadcast(string(args[0]), args); got != c.want {
			t.Errorf("isBroadcast(%q) = %v, want %v", c.cmd, got, c.want)
		}
	}
}

// TestMergeExists: SCRIPT EXISTS over the masters says 1 only where every master says 1; an
// error or an unreadable reply of any master is the answer.
func TestMergeExists(t *testing.T) {
	for _, c := range []struct {
		name    string
		replies []string
		want    string
	}{
		{"one master", []string{"*2\r\n:1\r\n:0\r\n"}, "*2\r\n:1\r\n:0\r\n"},
		{"all have both", []string{"*2\r\n:1\r\n:1\r\n", "*2\r\n:1\r\n:1\r\n"}, "*2\r\n:1\r\n:1\r\n"},
		{"one lacks the first", []string{"*2\r\n:1\r\n:1\r\n", "*2\r\n:0\r\n:1\r\n", "*2\r\n:1\r\n:1\r\n"}, "*2\r\n:0\r\n:1\r\n"},
		{"each lacks one", []string{"*2\r\n:0\r\n:1\r\n", "*2\r\n:1\r\n:0\r\n"}, "*2\r\n:0\r\n:0\r\n"},
		{"an error", []string{"*1\r\n:1\r\n", "-NOPERM no\r\n"}, "-NOPERM no\r\n"},
		{"not an array", []string{"*1\r\n:1\r\n", "+OK\r\n"}, "+OK\r\n"},
		{"a shorter reply", []string{"*2\r\n:1\r\n:1\r\n", "*1\r\n:0\r\n"}, "*2\r\n:0\r\n:1\r\n"},
	} {
		var replies [][]byte
		for _, r := range c.replies {
			replies = append(replies, []byte(r))
		}
		if got := string(mergeExists(replies)); got != c.want {
			t.Errorf("%s: %q, want %q", c.name, got, c.want)
		}
	}
}

// TestSameSlot: keys share a slot when their hash tags do, whatever else they hold.
func TestSameSlot(t *testing.T) {
	for _, c := range []struct {
		keys string
		want bool
	}{
		// foo and bar: slots 12182 and 5061 (CLUSTER KEYSLOT); {user1000}.following and
		// .followers share 3443; an empty tag hashes the whole key.
		{"a", true}, {"{u}a {u}b {u}", true}, {"foo bar", false}, {"foo foo", true},
		{"{user1000}.following {user1000}.followers", true}, {"foo{}{bar} foo{bar}{zap}", false},
		{"{u}a {v}a", false}, {"x{u}y z{u}", true}, {"foo {}foo", false},
	} {
		if got := sameSlot(argsOf(c.keys)); got != c.want {
			t.Errorf("sameSlot(%q) = %v, want %v", c.keys, got, c.want)
		}
	}
}

// TestReplyPieces: the small readers of raw replies take a bulk string's content, and nothing
// from what is not one.
func TestReplyPieces(t *testing.T) {
	for _, c := range []struct {
		raw, value, body string
		null             bool
	}{
		{"$5\r\nhello\r\n", "hello", "hello", false},
		{"$0\r\n\r\n", "", "", false},
		{"$-1\r\n", "", "", true},
		{"_\r\n", "", "", true},
		{"$4\r\na\r\nb\r\n", "a\r\nb", "a\r\nb", false},
		{"", "", "", false},
		{"+OK", "", "", false},
	} {
		if got := bulkValue([]byte(c.raw)); string(got) != c.value {
			t.Errorf("bulkValue(%q) = %q, want %q", c.raw, got, c.value)
		}
		if got := bulkBody([]byte(c.raw)); string(got) != c.body {
			t.Errorf("bulkBody(%q) = %q, want %q", c.raw, got, c.body)
		}
		if got := isNull([]byte(c.raw)); got != c.null {
			t.Errorf("isNull(%q) = %v", c.raw, got)
		}
	}
	if got := bulkBody([]byte(":1\r\n")); got != nil {
		t.Errorf("bulkBody of an integer: %q", got)
	}
	if got := string(bulk([]byte("a\r\nb"))); got != "$4\r\na\r\nb\r\n" {
		t.Errorf("bulk: %q", got)
	}
	if got := string(integer(-12)); got != ":-12\r\n" {
		t.Errorf("integer: %q", got)
	}
}

// TestClipArg: an argument named in an error text is cut at 64 bytes.
func TestClipArg(t *testing.T) {
	if got := clipArg([]byte("short")); got != "short" {
		t.Errorf("%q", got)
	}
	long := bytes.Repeat([]byte("k"), 1<<20)
	if got := clipArg(long); got != strings.Repeat("k", 64)+"..." {
		t.Errorf("clipArg of 1 MiB: %d bytes", len(got))
	}
	if got := clipArg(long[:64]); got != strings.Repeat("k", 64) {
		t.Errorf("clipArg of 64 bytes: %q", got)
	}
}

// TestCopyArgs: the copy owns its bytes: reusing the buffer the arguments pointed into leaves
// it as it was.
func TestCopyArgs(t *testing.T) {
	buf := []byte("SETkeyvalue")
	args := [][]byte{buf[:3], buf[3:6], buf[6:], {}}
	cp := copyArgs(args)
	copy(buf, "XXXXXXXXXXX")
	if got := string(bytes.Join(cp, []byte(" "))); got != "SET key value " || len(cp) != 4 {
		t.Errorf("copy after the buffer's reuse: %q (%d args)", got, len(cp))
	}
}

// TestAppendCommand: a command goes to Redis as an array of bulk strings, binary arguments
// (CRLF, empty) and all, and reads back as what was sent.
func TestAppendCommand(t *testing.T) {
	args := [][]byte{[]byte("SET"), []byte("k\r\n"), {}}
	got := appendCommand([]byte("x"), args)
	if want := "x*3\r\n$3\r\nSET\r\n$3\r\nk\r\n\r\n$0\r\n\r\n"; string(got) != want {
		t.Fatalf("appendCommand = %q, want %q", got, want)
	}
	if got := string(appendCommand(nil, nil)); got != "*0\r\n" {
		t.Fatalf("no arguments: %q", got)
	}
}

// TestErrorReplies: a connection's failure reaches the client as one line of UNAVAILABLE (a
// CRLF in the cause cannot end the reply early); a bound on connections of their own answers
// its own BUSY text; MOVED and ASK, and only they, are redirects; a subscriber's PING reply is
// told from a message.
func TestErrorReplies(t *testing.T) {
	if got := string(unavailable(errors.New("dial tcp: refused\r\n+OK"))); got != "-UNAVAILABLE dial tcp: refused +OK\r\n" {
		t.Errorf("unavailable: %q", got)
	}
	busy := fmt.Errorf("wrapped: %w", &ErrTooManyOwn{Limit: 7})
	if got := string(unavailable(busy)); !strings.HasPrefix(got, "-BUSY 7 ") || strings.Count(got, "\r\n") != 1 {
		t.Errorf("unavailable(ErrTooManyOwn): %q", got)
	}
	for reply, want := range map[string]bool{"-MOVED 1 a:1\r\n": true, "-ASK 1 a:1\r\n": true, "-MOVEDX\r\n": false,
		"-ASKING\r\n": false, "-ERR MOVED 1\r\n": false, "+MOVED 1 a:1\r\n": false, "": false} {
		if got := isRedirect([]byte(reply)); got != want {
			t.Errorf("isRedirect(%q) = %v", reply, got)
		}
	}
	for msg, want := range map[string]bool{"*2\r\n$4\r\npong\r\n$0\r\n\r\n": true, "+PONG\r\n": true, "$2\r\nhi\r\n": true,
		"*3\r\n$7\r\nmessage\r\n$1\r\nc\r\n$4\r\npong\r\n": false, ">3\r\n$7\r\nmessage\r\n": false, "": false} {
		if got := isPingReply([]byte(msg)); got != want {
			t.Errorf("isPingReply(%q) = %v", msg, got)
		}
	}
}
