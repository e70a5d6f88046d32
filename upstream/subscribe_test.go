package upstream

import "testing"

// TestNotifyPatterns: which channels are keyspace or keyevent notifications, and which
// patterns may match one (and so are subscribed on every master).
func TestNotifyPatterns(t *testing.T) {
	for _, tc := range []struct {
		s               string
		channel, mayHit bool
	}{
		{"__keyspace@0__:foo", true, true},
		{"__keyevent@0__:set", true, true},
		{"__keyspace@", true, true},
		{"__keyspac", false, true}, // a channel no; as a pattern's literal start, it may go on
		{"*", false, true},
		{"?_keyspace@0__:*", false, true},
		{"[_]_keyevent@*", false, true},
		{"__key*", false, true},
		{`\_\_keyspace@0__:*`, false, true}, // an escape ends what is read as literal
		{"__keyspace@0__:*", true, true},
		{"news.*", false, false},
		{"_x*", false, false},
		{"", false, true},
		{"keyspace@0__:*", false, false},
	} {
		if got := notifyChannel([]byte(tc.s)); got != tc.channel {
			t.Errorf("notifyChannel(%q) = %v, want %v", tc.s, got, tc.channel)
		}
		if got := mayMatchNotify([]byte(tc.s)); got != tc.mayHit {
			t.Errorf("mayMatchNotify(%q) = %v, want %v", tc.s, got, tc.mayHit)
		}
	}
}

// TestMessageOf: a subscriber's replies and messages by kind, over RESP2 and RESP3.
func TestMessageOf(t *testing.T) {
	for _, tc := range []struct{ raw, kind, channel string }{
		{"*3\r\n$7\r\nmessage\r\n$2\r\nch\r\n$1\r\nx\r\n", "message", "ch"},
		{">3\r\n$7\r\nmessage\r\n$2\r\nch\r\n$1\r\nx\r\n", "message", "ch"},
		{"*4\r\n$8\r\npmessage\r\n$1\r\n*\r\n$2\r\nch\r\n$1\r\nx\r\n", "pmessage", "ch"},
		{"*3\r\n$9\r\nsubscribe\r\n$2\r\nch\r\n:1\r\n", "subscribe", ""},
		{">3\r\n$10\r\npsubscribe\r\n$1\r\n*\r\n:1\r\n", "psubscribe", ""},
		{"*2\r\n$7\r\nmessage\r\n$2\r\nch\r\n", "message", ""},
		{"+PONG\r\n", "", ""},
		{"*1\r\n", "", ""},
	} {
		kind, channel := messageOf([]byte(tc.raw))
		if kind != tc.kind || string(channel) != tc.channel {
			t.Errorf("messageOf(%q) = %q, %q; want %q, %q", tc.raw, kind, channel, tc.kind, tc.channel)
		}
	}
}

// TestSlotZeroKey: the pub/sub home's key is in slot 0.
func TestSlotZeroKey(t *testing.T) {
	if s := Slot(slotZeroKey); s != 0 {
		t.Fatalf("Slot(%q) = %d", slotZeroKey, s)
	}
}
