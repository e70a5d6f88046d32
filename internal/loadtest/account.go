package loadtest

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// Where an order's CPU goes, as the design asks it to be accounted (measure before you cut):
// each process's user+system time from /proc around a sale, over its orders, by role (the
// proxy, each Redis node by port, Kafka, the sink, MySQL, the load tool itself); and each
// Redis node's INFO commandstats around the sale, calls and microseconds per order by
// command. RunSchemes records both for every scheme's round (SchemeResult.Processes and
// .Commands); SchemesAccountTables shows them.

// procCPU is the CPU each role's processes have used so far.
type procCPU map[string]time.Duration

// clockTick is USER_HZ: /proc's times are in its ticks (100 a second on Linux).
const clockTick = 10 * time.Millisecond

// sampleProcesses reads every process's CPU from /proc, by role (roleOf); processes of no
// role are left out.
func sampleProcesses() procCPU {
	out := procCPU{}
	dirs, _ := filepath.Glob("/proc/[0-9]*")
	self := os.Getpid()
	for _, d := range dirs {
		pid, err := strconv.Atoi(filepath.Base(d))
		if err != nil {
			continue
		}
		stat, err := os.ReadFile(d + "/stat")
		if err != nil {
			continue
		}
		cmdline, _ := os.ReadFile(d + "/cmdline")
		role := roleOf(pid == self, string(stat), strings.ReplaceAll(string(cmdline), "\x00", " "))
		if role == "" {
			continue
		}
		if t, ok := statCPU(string(stat)); ok {
			out[role] += t
		}
	}
	return out
}

// roleOf is what a process is to a sale: "" for none of its processes.
func roleOf(self bool, stat, cmdline string) string {
	open, end := strings.IndexByte(stat, '('), strings.LastIndexByte(stat, ')')
	if open < 0 || end < open {
		return ""
	}
	comm := stat[open+1 : end]
	switch {
	case self:
		return "the load tool"
	case comm == "redis-server": // its title: redis-server 127.0.0.1:7000 [cluster]
		if f := strings.Fields(cmdline); len(f) > 1 {
			if i := strings.LastIndexByte(f[1], ':'); i >= 0 {
				return "redis " + f[1][i+1:]
			}
		}
		return "redis"
	case comm == "seckill-proxy", comm == "seckill-sink":
		return comm
	case comm == "java" && strings.Contains(cmdline, "kafka"):
		return "kafka"
	case comm == "mariadbd", comm == "mysqld":
		return "mariadb"
	}
	return ""
}

// statCPU is a /proc/<pid>/stat line's user+system time (fields 14 and 15, counted after the
// command's closing parenthesis, which may hold spaces).
func statCPU(stat string) (time.Duration, bool) {
	end := strings.LastIndexByte(stat, ')')
	if end < 0 {
		return 0, false
	}
	f := strings.Fields(stat[end+1:])
	if len(f) < 13 {
		return 0, false
	}
	u, err1 := strconv.ParseInt(f[11], 10, 64)
	s, err2 := strconv.ParseInt(f[12], 10, 64)
	if err1 != nil || err2 != nil {
		return 0, false
	}
	return time.Duration(u+s) * clockTick, true
}

// ProcessCost is one role's CPU per order in a sale.
type ProcessCost struct {
	Role       string  `json:"role"`
	UsPerOrder float64 `json:"us_per_order"`
}

// processCosts are after's CPU less before's, per order, the dearest first.
func processCosts(before, after procCPU, orders int64) []ProcessCost {
	if orders <= 0 {
		return nil
	}
	var out []ProcessCost
	for role, t := range after {
		if d := t - before[role]; d > 0 {
			out = append(out, ProcessCost{Role: role, UsPerOrder: float64(d.Microseconds()) / float64(orders)})
		}
	}
	slices.SortFunc(out, func(a, b ProcessCost) int { return strings.Compare(a.Role, b.Role) })
	return out
}

// cmdStats are a node's commandstats: calls and microseconds by command.
type cmdStats map[string][2]int64

// nodeStats are every node's commandstats, by address.
type nodeStats map[string]cmdStats

// sampleCommands reads INFO commandstats of every node at addrs (one that does not answer is
// left out: its row is then missing, not wrong).
func sampleCommands(ctx context.Context, addrs []string) nodeStats {
	out := nodeStats{}
	for _, a := range addrs {
		c := redis.NewClient(&redis.Options{Addr: a, DialTimeout: time.Second, ReadTimeout: 2 * time.Second})
		info, err := c.Info(ctx, "commandstats").Result()
		_ = c.Close()
		if err == nil {
			out[a] = parseCommandStats(info)
		}
	}
	return out
}

// parseCommandStats reads INFO commandstats: cmdstat_<name>:calls=N,usec=M,...
func parseCommandStats(info string) cmdStats {
	out := cmdStats{}
	for _, l := range strings.Split(info, "\n") {
		name, rest, ok := strings.Cut(strings.TrimSpace(l), ":")
		if !ok || !strings.HasPrefix(name, "cmdstat_") {
			continue
		}
		var calls, usec int64
		for _, kv := range strings.Split(rest, ",") {
			k, v, _ := strings.Cut(kv, "=")
			n, _ := strconv.ParseInt(v, 10, 64)
			switch k {
			case "calls":
				calls = n
			case "usec":
				usec = n
			}
		}
		out[strings.TrimPrefix(name, "cmdstat_")] = [2]int64{calls, usec}
	}
	return out
}

// CommandCost is one command's calls and time per order on one node in a sale.
type CommandCost struct {
	Node          string  `json:"node"`
	Command       string  `json:"command"`
	CallsPerOrder float64 `json:"calls_per_order"`
	UsPerOrder    float64 `json:"us_per_order"`
}

// commandCosts are after's commandstats less before's, per order: every command that took at
// least 0.05 µs an order, by node and command.
func commandCosts(before, after nodeStats, orders int64) []CommandCost {
	if orders <= 0 {
		return nil
	}
	var out []CommandCost
	for node, cmds := range after {
		for name, v := range cmds {
			b := before[node][name]
			us := float64(v[1]-b[1]) / float64(orders)
			if us < 0.05 {
				continue
			}
			out = append(out, CommandCost{Node: node, Command: name, CallsPerOrder: float64(v[0]-b[0]) / float64(orders), UsPerOrder: us})
		}
	}
	slices.SortFunc(out, func(a, b CommandCost) int {
		if c := strings.Compare(a.Node, b.Node); c != 0 {
			return c
		}
		return strings.Compare(a.Command, b.Command)
	})
	return out
}

// SchemesAccountTables are the schemes' CPU per order by process, and Redis's commands per
// order by node: a table each, a column per scheme.
func SchemesAccountTables(rs []SchemeResult) string {
	var b strings.Builder
	roles := map[string]map[string]float64{}
	var roleNames []string
	for _, r := range rs {
		for _, p := range r.Processes {
			if roles[p.Role] == nil {
				roles[p.Role] = map[string]float64{}
				roleNames = append(roleNames, p.Role)
			}
			roles[p.Role][r.Scheme] = p.UsPerOrder
		}
	}
	slices.Sort(roleNames)
	b.WriteString("CPU per order by process (µs; /proc, user + system, from the first request until the orders are kept):\n\n| process |")
	for _, r := range rs {
		b.WriteString(" " + r.Scheme + " |")
	}
	b.WriteString("\n|---|" + strings.Repeat("---|", len(rs)) + "\n")
	totals := make([]float64, len(rs))
	for _, role := range roleNames {
		fmt.Fprintf(&b, "| %s |", role)
		for i, r := range rs {
			v, ok := roles[role][r.Scheme]
			if !ok {
				b.WriteString(" - |")
				continue
			}
			totals[i] += v
			fmt.Fprintf(&b, " %.1f |", v)
		}
		b.WriteString("\n")
	}
	b.WriteString("| all of them |")
	for _, t := range totals {
		fmt.Fprintf(&b, " %.1f |", t)
	}
	b.WriteString("\n\nRedis per order by node (INFO commandstats: calls and µs per order, commands of 0.05 µs an order or more):\n\n")
	b.WriteString("| scheme | node | command | calls per order | µs per order |\n|---|---|---|---|---|\n")
	for _, r := range rs {
		var sum float64
		for _, c := range r.Commands {
			fmt.Fprintf(&b, "| %s | %s | %s | %.2f | %.1f |\n", r.Scheme, c.Node, c.Command, c.CallsPerOrder, c.UsPerOrder)
			sum += c.UsPerOrder
		}
		fmt.Fprintf(&b, "| %s | every node | all | - | %.1f |\n", r.Scheme, sum)
	}
	return b.String()
}
