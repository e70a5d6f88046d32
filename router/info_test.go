package router

import (
	"strings"
	"testing"
)

// TestMergeInfo: INFO over several masters sums counters, keeps one server's own figures,
// takes the highest of a maximum and the least connected_slaves (what WAIT can count on), merges
// the keyspace and its human sizes, and lists the masters.
func TestMergeInfo(t *testing.T) {
	a := "# Server\r\nprocess_id:11\r\nuptime_in_seconds:100\r\n\r\n# Clients\r\nconnected_clients:3\r\n\r\n# Memory\r\nused_memory:1024\r\nused_memory_human:1.00K\r\n\r\n# Replication\r\nrole:master\r\nconnected_slaves:1\r\n\r\n# Keyspace\r\ndb0:keys=2,expires=1,avg_ttl=0\r\n"
	b := "# Server\r\nprocess_id:22\r\nuptime_in_seconds:300\r\n\r\n# Clients\r\nconnected_clients:4\r\n\r\n# Memory\r\nused_memory:3072\r\nused_memory_human:3.00K\r\n\r\n# Replication\r\nrole:master\r\nconnected_slaves:0\r\n\r\n# Keyspace\r\ndb0:keys=5,expires=0,avg_ttl=0\r\ndb1:keys=1,expires=0,avg_ttl=0\r\n"
	got := mergeInfo([]string{"n1:7000", "n2:7001"}, []string{a, b})
	for _, want := range []string{
		"# Server\r\nprocess_id:11\r\n",
		"connected_clients:7\r\n",
		"used_memory:4096\r\nused_memory_human:4.00K\r\n",
		"role:master\r\nconnected_slaves:0\r\n",
		"db0:keys=7,expires=1",
		"db1:keys=1,expires=0",
		"\r\n# Nodes\r\nmasters:2\r\nmaster_addrs:n1:7000,n2:7001\r\n",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("merged INFO lacks %q:\n%s", want, got)
		}
	}
	if strings.Index(got, "# Server") > strings.Index(got, "# Clients") || strings.Index(got, "# Replication") > strings.Index(got, "# Keyspace") {
		t.Errorf("sections out of the first master's order:\n%s", got)
	}
	if n := strings.Count(got, "# Keyspace"); n != 1 {
		t.Errorf("%d Keyspace headers, want 1", n)
	}
}

// TestInfoFields: a field only a later master has comes after the fields read before it, in
// its section; a line without ':' is not a field.
func TestInfoFields(t *testing.T) {
	order, values := infoFields([]string{"# Keyspace\r\ndb0:keys=1\r\nnoise\r\n", "# Keyspace\r\ndb0:keys=2\r\ndb3:keys=9\r\n"})
	var names []string
	for _, f := range order {
		names = append(names, f.section+"/"+f.name)
	}
	if got, want := strings.Join(names, " "), "Keyspace/ Keyspace/db0 Keyspace/db3"; got != want {
		t.Errorf("order %q, want %q", got, want)
	}
	if got := values["Keyspace/db0"]; len(got) != 2 || got[0] != "keys=1" || got[1] != "keys=2" {
		t.Errorf("db0's values %q", got)
	}
}
