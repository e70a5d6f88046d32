package loadtest

import (
	"strings"
	"testing"
	"time"
)

// TestAccountReading: /proc stat lines (a command with spaces and parentheses in its name),
// process roles, and INFO commandstats are read as the kernel and Redis write them; the
// tables show each role and command per order.
func TestAccountReading(t *testing.T) {
	stat := "1234 (redis-server) S 1 1234 1234 0 -1 4194560 100 0 0 0 250 75 0 0 20 0 4 0 100 0 0"
	if d, ok := statCPU(stat); !ok || d != 325*clockTick {
		t.Fatalf("statCPU: %v %v, want 3.25 s", d, ok)
	}
	if _, ok := statCPU("1 (odd) name) S"); ok {
		t.Fatal("a short stat line read")
	}
	for _, tt := range []struct {
		self          bool
		stat, cmdline string
		want          string
	}{
		{false, stat, "redis-server 127.0.0.1:7003 [cluster]", "redis 7003"},
		{false, "9 (seckill-proxy) S", "./bin/seckill-proxy", "seckill-proxy"},
		{false, "9 (java) S", "java -cp /x/kafka_2.13.jar kafka.Kafka", "kafka"},
		{false, "9 (java) S", "java -jar redisson.jar", ""},
		{false, "9 (mariadbd) S", "/usr/sbin/mariadbd", "mariadb"},
		{true, "9 (seckill-bench) S", "", "the load tool"},
		{false, "9 (bash) S", "bash", ""},
	} {
		if got := roleOf(tt.self, tt.stat, tt.cmdline); got != tt.want {
			t.Errorf("%q: %q, want %q", tt.cmdline, got, tt.want)
		}
	}
	info := "# Commandstats\r\ncmdstat_evalsha:calls=100,usec=4000,usec_per_call=40.00,rejected_calls=0,failed_calls=0\r\ncmdstat_wait:calls=10,usec=50,usec_per_call=5.00\r\n"
	st := parseCommandStats(info)
	if st["evalsha"] != [2]int64{100, 4000} || st["wait"] != [2]int64{10, 50} {
		t.Fatalf("commandstats: %v", st)
	}
	before := nodeStats{"a": {"evalsha": {50, 1000}}}
	after := nodeStats{"a": st}
	cc := commandCosts(before, after, 10)
	if len(cc) != 2 || cc[0].Command != "evalsha" || cc[0].CallsPerOrder != 5 || cc[0].UsPerOrder != 300 {
		t.Fatalf("command costs: %+v", cc)
	}
	pc := processCosts(procCPU{"redis 7000": time.Second}, procCPU{"redis 7000": 2 * time.Second, "kafka": time.Second}, 1000)
	if len(pc) != 2 || pc[0].Role != "kafka" || pc[0].UsPerOrder != 1000 || pc[1].UsPerOrder != 1000 {
		t.Fatalf("process costs: %+v", pc)
	}
	table := SchemesAccountTables([]SchemeResult{{Scheme: "proxy", Processes: pc, Commands: cc}})
	for _, want := range []string{"| kafka | 1000.0 |", "| all of them | 2000.0 |", "| proxy | a | evalsha | 5.00 | 300.0 |"} {
		if !strings.Contains(table, want) {
			t.Errorf("no %q in\n%s", want, table)
		}
	}
}
