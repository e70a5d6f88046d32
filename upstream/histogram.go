package upstream

import (
	"context"
	"slices"
	"strconv"

	"seckill-proxy/internal/resp"
)

// latencyHistogram answers LATENCY HISTOGRAM [command ...] in front of a cluster as one server
// holding every master's calls would: per command, the calls summed, and the histogram's
// cumulative counts summed bucket by bucket (a master without a bucket counts what it has
// below it). The reply keeps its shape: a map in RESP3, a flat array in RESP2.
func (c *Cluster) latencyHistogram(ctx context.Context, args [][]byte) []byte {
	_, replies, err := c.OnEveryMaster(ctx, args)
	if err != nil {
		return unavailable(err)
	}
	type command struct {
		calls   int64
		masters [][]histBucket
	}
	var order []string
	byName := map[string]*command{}
	resp3 := false
	for _, r := range replies {
		if len(r) > 0 && r[0] == '-' {
			return r
		}
		resp3 = resp3 || (len(r) > 0 && r[0] == '%')
		els, ok := splitAggregate(r)
		if !ok || len(els)%2 != 0 {
			return errorReply("ERR unexpected LATENCY HISTOGRAM reply from a master")
		}
		for i := 0; i < len(els); i += 2 {
			name := string(bulkBody(els[i]))
			calls, hist, ok := parseHistogram(els[i+1])
			if !ok {
				return errorReply("ERR unexpected LATENCY HISTOGRAM entry from a master")
			}
			cmd := byName[name]
			if cmd == nil {
				cmd = &command{}
				byName[name] = cmd
				order = append(order, name)
			}
			cmd.calls += calls
			cmd.masters = append(cmd.masters, hist)
		}
	}
	out := make([][]byte, 0, 2*len(order))
	for _, name := range order {
		cmd := byName[name]
		merged := mergeHistograms(cmd.masters)
		flat := make([][]byte, 0, 2*len(merged))
		for _, b := range merged {
			flat = append(flat, integer(b.usec), integer(b.count))
		}
		fields := [][]byte{bulk([]byte("calls")), integer(cmd.calls), bulk([]byte("histogram_usec")), aggregate(flat, resp3)}
		out = append(out, bulk([]byte(name)), aggregate(fields, resp3))
	}
	return aggregate(out, resp3)
}

// histBucket is one bucket of a latency histogram: the calls that took at most usec
// microseconds (cumulative, as Redis counts them).
type histBucket struct{ usec, count int64 }

// mergeHistograms sums cumulative histograms bucket by bucket over every bucket any has.
func mergeHistograms(hs [][]histBucket) []histBucket {
	var edges []int64
	for _, h := range hs {
		for _, b := range h {
			edges = append(edges, b.usec)
		}
	}
	slices.Sort(edges)
	edges = slices.Compact(edges)
	out := make([]histBucket, len(edges))
	for i, e := range edges {
		out[i].usec = e
		for _, h := range hs {
			// the master's cumulative count at e: its last bucket at or below e
			j, _ := slices.BinarySearchFunc(h, e, func(b histBucket, t int64) int {
				switch {
				case b.usec < t:
					return -1
				case b.usec > t:
					return 1
				}
				return 0
			})
			if j < len(h) && h[j].usec == e {
				out[i].count += h[j].count
			} else if j > 0 {
				out[i].count += h[j-1].count
			}
		}
	}
	return out
}

// parseHistogram reads one command's entry: calls N histogram_usec [bucket count ...].
func parseHistogram(raw []byte) (calls int64, hist []histBucket, ok bool) {
	f, ok := splitAggregate(raw)
	if !ok || len(f)%2 != 0 {
		return 0, nil, false
	}
	for i := 0; i < len(f); i += 2 {
		switch string(bulkBody(f[i])) {
		case "calls":
			n, err := resp.ParseInt(f[i+1])
			if err != nil {
				return 0, nil, false
			}
			calls = n
		case "histogram_usec":
			bs, ok := splitAggregate(f[i+1])
			if !ok || len(bs)%2 != 0 {
				return 0, nil, false
			}
			for j := 0; j < len(bs); j += 2 {
				u, err1 := resp.ParseInt(bs[j])
				n, err2 := resp.ParseInt(bs[j+1])
				if err1 != nil || err2 != nil {
					return 0, nil, false
				}
				hist = append(hist, histBucket{u, n})
			}
			slices.SortFunc(hist, func(a, b histBucket) int { return int(a.usec - b.usec) })
		}
	}
	return calls, hist, true
}

// splitAggregate splits an array, set, push or map reply into its elements (a map's keys and
// values in turn).
func splitAggregate(raw []byte) ([][]byte, bool) {
	if len(raw) > 0 && raw[0] == '%' {
		i := indexCRLF(raw)
		if i < 2 {
			return nil, false
		}
		n, err := strconv.Atoi(string(raw[1:i]))
		if err != nil || n < 0 {
			return nil, false
		}
		as := append([]byte("*"+strconv.Itoa(2*n)+"\r\n"), raw[i+2:]...)
		els, err := resp.SplitArray(as)
		return els, err == nil
	}
	els, err := resp.SplitArray(raw)
	return els, err == nil
}

// aggregate is els as a map (RESP3, els its keys and values in turn) or a flat array.
func aggregate(els [][]byte, asMap bool) []byte {
	if !asMap {
		return arrayReply(els)
	}
	b := []byte("%" + strconv.Itoa(len(els)/2) + "\r\n")
	for _, e := range els {
		b = append(b, e...)
	}
	return b
}

func indexCRLF(b []byte) int {
	for i := 0; i+1 < len(b); i++ {
		if b[i] == '\r' && b[i+1] == '\n' {
			return i
		}
	}
	return -1
}
