package upstream

import (
	"bytes"
	"strings"
	"testing"
)

// TestLeastCounts: WAIT's answers merge to the least count, WAITAOF's to the least of each of
// their two; an error from any master is the answer; a reply of another shape is an error
// that quotes it.
func TestLeastCounts(t *testing.T) {
	tests := []struct {
		name    string
		replies []string
		want    string
	}{
		{"one master", []string{":2\r\n"}, ":2\r\n"},
		{"the least", []string{":2\r\n", ":0\r\n", ":1\r\n"}, ":0\r\n"},
		{"waitaof pairs", []string{"*2\r\n:1\r\n:2\r\n", "*2\r\n:0\r\n:3\r\n"}, "*2\r\n:0\r\n:2\r\n"},
		{"an error wins", []string{":1\r\n", "-NOREPLICAS no\r\n", ":2\r\n"}, "-NOREPLICAS no\r\n"},
		{"shapes differ", []string{":1\r\n", "*2\r\n:0\r\n:3\r\n"}, "-ERR upstream WAIT replies of different shapes\r\n"},
		{"not a count", []string{"$1\r\nx\r\n"}, `-ERR upstream WAIT reply "$1\r\nx\r\n"` + "\r\n"},
		{"an empty array", []string{"*0\r\n"}, `-ERR upstream WAIT reply "*0\r\n"` + "\r\n"},
		{"an array of another type", []string{"*1\r\n+OK\r\n"}, `-ERR upstream WAIT reply "*1\r\n+OK\r\n"` + "\r\n"},
	}
	for _, tc := range tests {
		var replies [][]byte
		for _, r := range tc.replies {
			replies = append(replies, []byte(r))
		}
		if got := string(leastCounts(replies)); got != tc.want {
			t.Errorf("%s: %q, want %q", tc.name, got, tc.want)
		}
	}
}

// TestProbes: each slot's probe key hashes to that slot; the probe is a transaction that
// writes and deletes it; probeRefused finds what stopped it, in a command's reply or inside
// EXEC's, and nothing when both writes ran.
func TestProbes(t *testing.T) {
	for _, slot := range []uint16{0, 1, 5461, 12182, 16383} {
		k := probeKey(slot)
		if Slot(k) != slot || !bytes.HasPrefix(k, []byte(probeKeyPrefix)) {
			t.Errorf("probeKey(%d) = %q, in slot %d", slot, k, Slot(k))
		}
	}
	cmds := probeCommands([]byte("k"))
	var names []string
	for _, c := range cmds {
		names = append(names, string(c[0]))
	}
	if strings.Join(names, " ") != "MULTI SET DEL EXEC" || string(cmds[1][1]) != "k" || string(cmds[2][1]) != "k" {
		t.Fatalf("probe = %q", cmds)
	}
	ran := [][]byte{[]byte("+OK\r\n"), []byte("+QUEUED\r\n"), []byte("+QUEUED\r\n"), []byte("*2\r\n+OK\r\n:1\r\n"), []byte(":1\r\n")}
	if r := probeRefused(ran); r != nil {
		t.Errorf("a transaction that ran: refused with %q", r)
	}
	noperm := bytes.Clone(ran[1])
	refused := [][]byte{ran[0], []byte("-NOPERM no\r\n"), ran[2], []byte("-EXECABORT Transaction discarded\r\n"), ran[4]}
	if r := probeRefused(refused); string(r) != "-NOPERM no\r\n" {
		t.Errorf("a queued write refused: %q", r)
	}
	inside := [][]byte{ran[0], noperm, ran[2], []byte("*2\r\n-OOM no\r\n:1\r\n"), ran[4]}
	if r := probeRefused(inside); !bytes.Contains(r, []byte("-OOM")) {
		t.Errorf("a write refused inside EXEC: %q", r)
	}
	nilExec := [][]byte{ran[0], noperm, ran[2], []byte("*-1\r\n"), ran[4]}
	if r := probeRefused(nilExec); string(r) != "*-1\r\n" {
		t.Errorf("EXEC aborted: %q", r)
	}
}

// TestLoginCommands: a new connection's first command, for each protocol and credentials.
func TestLoginCommands(t *testing.T) {
	tests := []struct {
		proto          int
		user, password string
		want           string
	}{
		{2, "", "", ""},
		{2, "", "pw", "AUTH pw"},
		{2, "u", "pw", "AUTH u pw"},
		{3, "", "", "HELLO 3"},
		{3, "", "pw", "HELLO 3 AUTH default pw"},
		{3, "u", "pw", "HELLO 3 AUTH u pw"},
		{3, "u", "", "HELLO 3 AUTH u "},
	}
	for _, tc := range tests {
		var parts []string
		for _, a := range loginCommand(tc.proto, tc.user, tc.password) {
			parts = append(parts, string(a))
		}
		if got := strings.Join(parts, " "); got != tc.want {
			t.Errorf("login(%d, %q, %q) = %q, want %q", tc.proto, tc.user, tc.password, got, tc.want)
		}
	}
}
