package router

import (
	"context"
	"fmt"
	"strconv"
	"strings"

	"seckill-proxy/guard"
)

// With Redis behind it, INFO is Redis's: a standalone server's as it is; a cluster's merged
// over its masters (mergeInfo). The proxy's own figures are the "seckill" section, which
// INFO, INFO all|everything|default and INFO seckill append.

// infoOf answers INFO with Redis behind the proxy.
func (r *Router) infoOf(ctx context.Context, args [][]byte) (Reply, error) {
	own, others := false, [][]byte{args[0]}
	for _, a := range args[1:] {
		switch strings.ToLower(string(a)) {
		case "seckill":
			own = true
		case "all", "everything", "default":
			own = true
			others = append(others, a)
		default:
			others = append(others, a)
		}
	}
	if len(args) == 1 {
		own = true
	}
	var b strings.Builder
	if len(others) > 1 || len(args) == 1 {
		addrs, replies, err := r.opt.Upstream.OnEveryMaster(ctx, others)
		if err != nil {
			return nil, err
		}
		texts := make([]string, len(replies))
		for i, raw := range replies {
			if raw[0] != '$' {
				return rawReply(raw), nil // Redis's error, or UNAVAILABLE
			}
			texts[i] = bulkText(raw)
		}
		if len(texts) == 1 {
			b.WriteString(texts[0])
		} else {
			b.WriteString(mergeInfo(addrs, texts))
		}
	}
	if own {
		if b.Len() > 0 && !strings.HasSuffix(b.String(), "\r\n\r\n") {
			b.WriteString("\r\n")
		}
		writeSection(&b, "Seckill", r.ownInfo())
	}
	return Verbatim(b.String()), nil
}

// ownInfo is the proxy's own section: its clients and commands, then the buy engine's and
// the tee's counters.
func (r *Router) ownInfo() []guard.Field {
	fs := []guard.Field{{Name: "seckill_proxy", Value: "1"}}
	fs = append(fs, r.proxyStats()...)
	if r.guard != nil {
		fs = append(fs, r.proxyCounters()...)
	}
	return fs
}

func writeSection(b *strings.Builder, title string, fs []guard.Field) {
	fmt.Fprintf(b, "# %s\r\n", title)
	for _, f := range fs {
		fmt.Fprintf(b, "%s:%v\r\n", f.Name, f.Value)
	}
}

// bulkText is a raw bulk string's content.
func bulkText(raw []byte) string {
	i := strings.Index(string(raw), "\r\n")
	if i < 0 || len(raw) < i+4 {
		return ""
	}
	return string(raw[i+2 : len(raw)-2])
}

// Merging a cluster's INFO, field by field, as one server would report the whole: integers
// are summed (clients, memory, keys, commands, CPU), except those below; anything else
// (versions, modes, ratios, human-readable sizes) is the first master's. The replication
// section is per node and meaningless summed: it is the first master's, with connected_slaves
// the least of any master's, the replicas a client may WAIT for wherever it wrote (Redisson
// reads it, then asks WAIT for that many after each lock).
var (
	// infoMax are the fields where one master's state stands for all: any loading or
	// rewriting shows.
	infoMax = map[string]bool{
		"loading": true, "async_loading": true, "rdb_bgsave_in_progress": true, "aof_rewrite_in_progress": true,
		"aof_rewrite_scheduled": true, "module_fork_in_progress": true, "uptime_in_seconds": true, "uptime_in_days": true,
		"current_fork_perc": true, "rdb_last_bgsave_time_sec": true, "aof_last_rewrite_time_sec": true,
	}
	// infoFirst are integers that are one server's, not a sum.
	infoFirst = map[string]bool{
		"process_id": true, "tcp_port": true, "arch_bits": true, "hz": true, "configured_hz": true,
		"lru_clock": true, "server_time_usec": true, "io_threads_active": true, "master_repl_offset": true,
		"second_repl_offset": true, "repl_backlog_active": true, "repl_backlog_size": true,
		"repl_backlog_first_byte_offset": true, "repl_backlog_histlen": true, "rdb_last_save_time": true,
		"maxclients": true, "cluster_enabled": true, "executable": true, "mem_allocator": true,
	}
)

// mergeInfo merges the INFO texts of several masters into one, in the first master's
// section and field order, and adds a "# Nodes" line naming them.
func mergeInfo(addrs []string, texts []string) string {
	order, values := infoFields(texts)
	var b strings.Builder
	for i, f := range order {
		if f.name == "" {
			if i > 0 {
				b.WriteString("\r\n")
			}
			b.WriteString("# " + f.section + "\r\n")
			continue
		}
		v := mergeValue(f.section, f.name, values[f.section+"/"+f.name])
		if base, ok := strings.CutSuffix(f.name, "_human"); ok && values[f.section+"/"+base] != nil {
			if n, err := strconv.ParseInt(mergeValue(f.section, base, values[f.section+"/"+base]), 10, 64); err == nil {
				v = humanBytes(n)
			}
		}
		b.WriteString(f.name + ":" + v + "\r\n")
	}
	b.WriteString("\r\n# Nodes\r\nmasters:" + strconv.Itoa(len(addrs)) + "\r\nmaster_addrs:" + strings.Join(addrs, ",") + "\r\n")
	return b.String()
}

// infoField is one of INFO's lines: a section's header (name "") or a field of it.
type infoField struct{ section, name string }

// infoFields reads INFO texts: their lines in the first text's order (a field only a later
// text has, such as a db, after the fields before it), and each field's values, by
// "section/name".
func infoFields(texts []string) ([]infoField, map[string][]string) {
	var order []infoField
	values := map[string][]string{} // section/name -> each master's value
	section := ""
	for i, text := range texts {
		for _, line := range strings.Split(text, "\r\n") {
			if h, ok := strings.CutPrefix(line, "# "); ok {
				section = h
				if i == 0 {
					order = append(order, infoField{section: section})
				}
				continue
			}
			name, value, ok := strings.Cut(line, ":")
			if !ok {
				continue
			}
			key := section + "/" + name
			if _, seen := values[key]; !seen || i == 0 {
				order = append(order, infoField{section: section, name: name})
			}
			values[key] = append(values[key], value)
		}
	}
	return order, values
}

// mergeValue merges one field's values over the masters.
func mergeValue(section, name string, vs []string) string {
	switch {
	case section == "Keyspace":
		return mergeKeyspace(vs)
	case section == "Replication" && name == "connected_slaves":
		least, err := strconv.ParseInt(vs[0], 10, 64)
		for _, v := range vs[1:] {
			n, err2 := strconv.ParseInt(v, 10, 64)
			if err2 != nil {
				err = err2
			}
			least = min(least, n)
		}
		if err != nil {
			return vs[0]
		}
		return strconv.FormatInt(least, 10)
	case section == "Replication", infoFirst[name]:
		return vs[0]
	}
	sum, best := int64(0), int64(0)
	for i, v := range vs {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			return vs[0]
		}
		sum += n
		if i == 0 || n > best {
			best = n
		}
	}
	if infoMax[name] {
		return strconv.FormatInt(best, 10)
	}
	return strconv.FormatInt(sum, 10)
}

// mergeKeyspace merges "keys=1,expires=0,avg_ttl=0" lines: keys and expires summed, avg_ttl
// the largest.
func mergeKeyspace(vs []string) string {
	var keys, expires, ttl int64
	for _, v := range vs {
		for _, kv := range strings.Split(v, ",") {
			k, val, _ := strings.Cut(kv, "=")
			n, _ := strconv.ParseInt(val, 10, 64)
			switch k {
			case "keys":
				keys += n
			case "expires":
				expires += n
			case "avg_ttl":
				ttl = max(ttl, n)
			}
		}
	}
	return fmt.Sprintf("keys=%d,expires=%d,avg_ttl=%d", keys, expires, ttl)
}

// humanBytes writes n as Redis's INFO does its *_human fields.
func humanBytes(n int64) string {
	f := float64(n)
	switch {
	case n < 1024:
		return strconv.FormatInt(n, 10) + "B"
	case n < 1024*1024:
		return fmt.Sprintf("%.2fK", f/1024)
	case n < 1024*1024*1024:
		return fmt.Sprintf("%.2fM", f/(1024*1024))
	case n < 1024*1024*1024*1024:
		return fmt.Sprintf("%.2fG", f/(1024*1024*1024))
	}
	return fmt.Sprintf("%.2fT", f/(1024*1024*1024*1024))
}

// nodeFields are INFO's fields that tell where the Redis nodes are (addresses, ports, files):
// an app client has no business reaching the nodes, so only an admin is shown them.
var nodeFields = map[string]bool{
	"master_addrs": true, "master_host": true, "master_port": true, "tcp_port": true,
	"executable": true, "config_file": true, "run_id": true,
}

// withoutNodes is text less its nodeFields and its replica lines (slave0:ip=...,port=...).
func withoutNodes(text string) string {
	var b strings.Builder
	for line := range strings.SplitAfterSeq(text, "\n") {
		name, _, ok := strings.Cut(line, ":")
		if ok && (nodeFields[name] || isReplicaLine(name)) {
			continue
		}
		b.WriteString(line)
	}
	return b.String()
}

// isReplicaLine: name is slave<n>, a replica's address line in INFO replication.
func isReplicaLine(name string) bool {
	rest, ok := strings.CutPrefix(name, "slave")
	if !ok || rest == "" {
		return false
	}
	_, err := strconv.Atoi(rest)
	return err == nil
}
