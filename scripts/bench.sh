#!/usr/bin/env bash
# bench.sh (make bench): every comparison of BENCHMARKS.md, measured in one run on this
# machine, then BENCHMARKS.md rewritten with the results, the date, the core count and the
# exact commands. Comparisons are ratios within this run; absolute figures from a shared
# machine are context, not claims.
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$ROOT"
OUT=${BENCH_OUT:-BENCHMARKS.md}
WORK=$ROOT/.stack/bench
mkdir -p "$WORK"
N=${BENCH_REQUESTS:-300000}
# BASE is the revision whose proxy the CPU table compares against: the last before the
# socket-free core, N loops and buys on the loop.
BASE=${BENCH_BASELINE:-73f24fa}
export BENCH_BASELINE_NAME=$BASE
# MBASE is the revision before the metrics: the (k) table measures what recording them costs.
MBASE=${BENCH_METRICS_BASELINE:-2ca946a}
export BENCH_METRICS_BASELINE_NAME=$MBASE

scripts/devstack.sh up
eval "$(scripts/devstack.sh env)"
go build -o bin/ ./cmd/...

echo "== (a, b) BUY and the sold-out path against direct EVALSHA" >&2
scripts/bench-buy.sh "$N" 3 >"$WORK/buy.md"

echo "== (c, f) the seeds' sale through the proxy, and through the seeds' own design" >&2
PORT=6392
run_id=$(date +%s)
# A topic and group of this run's own: a backlog left in the default topic must not slow the sink.
export SECKILL_KAFKA_TOPIC=bench.sale.$run_id SECKILL_KAFKA_DEAD_LETTER_TOPIC=bench.sale.$run_id.dlq SECKILL_KAFKA_GROUP=bench-$run_id
SECKILL_LISTEN=127.0.0.1:$PORT SECKILL_ADMIN_LISTEN= SECKILL_LOG_LEVEL=warn ./bin/seckill-proxy &
proxy_pid=$!
SECKILL_LOG_LEVEL=warn ./bin/seckill-sink &
sink_pid=$!
trap 'kill $proxy_pid $sink_pid 2>/dev/null || true; wait $proxy_pid $sink_pid 2>/dev/null || true' EXIT
for _ in $(seq 100); do redis-cli -p "$PORT" ping >/dev/null 2>&1 && break; sleep 0.1; done
SALE=(-units 2000 -buyers 80000 -conns 200)
# Three alternating rounds: the proxy; the seeds' service in a process of its own, as the proxy
# is (seckill-bench -serve-seeds); and the seeds' service inside the load tool's process.
SEEDS_PORT=6394
for round in 1 2 3; do
  ./bin/seckill-bench -addr 127.0.0.1:$PORT -sku bench_proxy "${SALE[@]}" -json >"$WORK/proxy.$round.json" 2>"$WORK/proxy.err" || { cat "$WORK/proxy.err" >&2; exit 1; }
  ./bin/seckill-bench -serve-seeds 127.0.0.1:$SEEDS_PORT -sku bench_seeds -units 2000 2>"$WORK/seeds-service.err" &
  seeds_pid=$!
  for _ in $(seq 100); do redis-cli -p $SEEDS_PORT ping 2>/dev/null | grep -q ERR && break; sleep 0.1; done
  ./bin/seckill-bench -mode seeds -seeds-addr 127.0.0.1:$SEEDS_PORT -sku bench_seeds "${SALE[@]}" -check=false -json >"$WORK/seeds.$round.json" 2>"$WORK/seeds.err" || { cat "$WORK/seeds.err" "$WORK/seeds-service.err" >&2; exit 1; }
  kill $seeds_pid && wait $seeds_pid || true
  ./bin/seckill-bench -mode seeds -sku bench_seeds_in "${SALE[@]}" -check=false -json >"$WORK/seedsin.$round.json" 2>"$WORK/seeds.err" || { cat "$WORK/seeds.err" >&2; exit 1; }
done

# build_proxy REV NAME: the proxy of revision REV, built into $WORK/NAME-bin/.
build_proxy() {
  rm -rf "$WORK/$2-src" && mkdir -p "$WORK/$2-src"
  git archive "$1" | tar -x -C "$WORK/$2-src"
  (cd "$WORK/$2-src" && go build -o "$WORK/$2-bin/" ./cmd/seckill-proxy)
}

echo "== (h) the proxy's CPU per request, this tree against $BASE" >&2
build_proxy "$BASE" base
scripts/bench-cpu.sh 100000 "$WORK/base-bin/seckill-proxy" 1 3 >"$WORK/cpu-base.md"
scripts/bench-cpu.sh 100000 ./bin/seckill-proxy 1 3 >"$WORK/cpu.md"
scripts/bench-cpu.sh 100000 ./bin/seckill-proxy 2 3 >"$WORK/cpu-2loops.md"

git show "$BASE:BENCHMARKS.md" >"$WORK/base-benchmarks.md"

echo "== (k) the metrics' cost: this tree against $MBASE" >&2
build_proxy "$MBASE" mbase
scripts/bench-cpu.sh 100000 "$WORK/mbase-bin/seckill-proxy" 1 3 >"$WORK/cpu-mbase.md"
scripts/bench-cpu.sh 100000 ./bin/seckill-proxy 1 3 >"$WORK/cpu-metrics.md"

echo "== (i) the seeds' stock script through the proxy" >&2
scripts/bench-legacy.sh 200000 3 >"$WORK/legacy.md"

echo "== (d) pass-through against twemproxy and direct" >&2
scripts/bench-passthrough.sh 200000 5 >"$WORK/pass.md"

echo "== (e) the sink" >&2
SECKILL_REQUIRE_SERVICES=1 go test ./sink -run XXX -bench 'BenchmarkSink$' -benchtime 100000x >"$WORK/sink.txt"
SECKILL_REQUIRE_SERVICES=1 go test ./sink -run XXX -bench 'BenchmarkPersist' -benchtime 20000x >"$WORK/persist.txt"

echo "== (g) large arguments and replies, against redis-server" >&2
SECKILL_REQUIRE_SERVICES=1 go test ./proxy -run XXX -bench BenchmarkLargeArgument -benchtime 5x >"$WORK/bigarg.txt"

echo "== (l) admission under its own rush: two proxies flat out on one RATE" >&2
scripts/bench-admission.sh 500 50 700000 100 >"$WORK/admission.md"

echo "== Go benchmarks of the hot paths" >&2
go test ./guard ./sink -run XXX -bench 'ParseBuy|OrderID|BuySoldOut|SoldOutCheck|EncodeOrder|Admit' -benchtime 1000000x >"$WORK/hot.txt"

python3 - "$WORK" "$OUT" "$N" <<'PY'
import json, re, sys, datetime, os
work, out, n = sys.argv[1], sys.argv[2], sys.argv[3]
def median_run(name):
    runs = sorted((json.load(open(f"{work}/{name}.{r}.json")) for r in (1, 2, 3)), key=lambda d: d["throughput_rps"])
    return runs[1]
proxy = median_run("proxy")
seeds = median_run("seeds")
seedsin = median_run("seedsin")
def metric(path, name):
    for line in open(path):
        m = re.search(rf"{name}\S*\s+\d+\s+.*?([\d.]+) orders/s", line)
        if m:
            return float(m.group(1))
    return None
sink = metric(f"{work}/sink.txt", "BenchmarkSink")
batch = metric(f"{work}/persist.txt", "BenchmarkPersist/batch=1000")
single = metric(f"{work}/persist.txt", "BenchmarkPersist/batch=1-")
buy = open(f"{work}/buy.md").read().strip().splitlines()
passthrough = open(f"{work}/pass.md").read().strip().splitlines()
hot = [l for l in open(f"{work}/hot.txt") if l.startswith("Benchmark")]
legacy = open(f"{work}/legacy.md").read().strip().splitlines()
def cpu_rows(path):
    rows = {}
    for line in open(path):
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) == 4 and cells[1].isdigit():
            rows[(cells[0], cells[1])] = (float(cells[2]), float(cells[3]))
    return rows
cpu_base, cpu_new, cpu_two = cpu_rows(f"{work}/cpu-base.md"), cpu_rows(f"{work}/cpu.md"), cpu_rows(f"{work}/cpu-2loops.md")
cpurows = []
for key, (us, rps) in cpu_new.items():
    b, t = cpu_base.get(key), cpu_two.get(key)
    if b is None:
        continue  # a request the baseline cannot serve (rate-limited buys): see (j)
    cpurows.append(f"| {key[0]} | {key[1]} | {b[0]:.1f} | {us:.1f} | {us / b[0]:.2f} | {t[0]:.1f} | {b[1]:.0f} | {rps:.0f} | {t[1]:.0f} |")
cpu_mbase, cpu_metrics = cpu_rows(f"{work}/cpu-mbase.md"), cpu_rows(f"{work}/cpu-metrics.md")
mrows = []
for key, (us, rps) in cpu_metrics.items():
    b = cpu_mbase.get(key)
    if b is not None:
        mrows.append(f"| {key[0]} | {key[1]} | {b[0]:.1f} | {us:.1f} | {us / b[0]:.2f} | {b[1]:.0f} | {rps:.0f} | {rps / b[1]:.2f} |")
mbase = os.environ.get("BENCH_METRICS_BASELINE_NAME", "")
admrows = []
for p in ("1", "16"):
    lim, sold = cpu_new[("rate-limited SECKILL.BUY", p)], cpu_new[("sold-out SECKILL.BUY", p)]
    admrows.append(f"| {p} | {sold[0]:.1f} | {lim[0]:.1f} | {sold[1]:.0f} | {lim[1]:.0f} | {lim[1] / sold[1]:.2f} |")
def per_get(rows, name):
    return rows[(name, "1")][0] / rows[("pass-through GET", "1")][0]
buy_get_new, buy_get_base = per_get(cpu_new, "successful SECKILL.BUY"), per_get(cpu_base, "successful SECKILL.BUY")
base = os.environ.get("BENCH_BASELINE_NAME", "")
old = open(f"{work}/base-benchmarks.md").read()
def pass_ratios(lines):
    rows = {}
    for line in lines:
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) == 8 and cells[2].isdigit():
            rows[(cells[0], cells[1], cells[2])] = (cells[6], cells[7])
    return rows
old_pass = pass_ratios(old[old.find("## (d)"):old.find("## (e)")].splitlines())
new_pass = pass_ratios(passthrough)
passcmp = []
for key, (tw, di) in new_pass.items():
    otw, odi = old_pass.get(key, ("-", "-"))
    passcmp.append(f"| {key[0]} | {key[1]} | {key[2]} | {otw} | {tw} | {odi} | {di} |")
m = re.search(r"proxy/seeds throughput ratio: \*\*([\d.]+)\*\*", old)
old_seeds = m.group(1) if m else "-"
big = {}
for line in open(f"{work}/bigarg.txt"):
    m = re.match(r"BenchmarkLargeArgument/(SET|GET)/(\d+)MiB/(redis|proxy)\S*\s+\d+\s+(\d+) ns/op", line)
    if m:
        big[(m.group(1), int(m.group(2)), m.group(3))] = int(m.group(4)) / 1e6
bigrows = []
for mib in sorted({k[1] for k in big}):
    row = f"| {mib} MiB |"
    for op in ("SET", "GET"):
        r, p = big.get((op, mib, "redis")), big.get((op, mib, "proxy"))
        row += f" {r:.0f} ms | {p:.0f} ms | {p / r:.1f} |" if r and p else " - | - | - |"
    bigrows.append(row)
def lat(r): return r["latency_us"]
checks = "all passed" if proxy["passed"] else "FAILED: " + ", ".join(c["name"] for c in proxy.get("checks", []) if not c["ok"])
now = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
md = f"""# Benchmarks

Measured by `make bench` (`scripts/bench.sh`) on {now}, on a machine with {os.cpu_count()} cores
that also runs the six Redis nodes, MariaDB and Kafka of the dev stack. Every comparison is a
ratio within this one run; the absolute figures are context, not claims.

## (a, b) SECKILL.BUY through the proxy against EVALSHA straight to the owning master

`scripts/bench-buy.sh {n} 3`: `redis-benchmark -c 50 -n {n} -r 100000000 -P 1|16`, against
`SECKILL.BUY <sku> __rand_int__ 1` on the proxy and `EVALSHA <buy.lua> 5 <keys> "" <route> __rand_int__ 1 direct bench`
on the master; medians of 3 alternating rounds. "sold out" is a SKU with no stock: the proxy
answers from its local flag, direct Redis runs the script.

{chr(10).join(buy[1:])}

## (c) The seeds' own design, on the same sale

`seckill-bench -units 2000 -buyers 80000 -conns 200` through the proxy (with the sink running),
against `seckill-bench -mode seeds` with the same load: the seeds' design as a RESP service
(one go-redis EVALSHA per request, a mutex-guarded sold-out flag, a synchronous Kafka send per
order), run as a process of its own as the proxy is (`seckill-bench -serve-seeds 127.0.0.1:6394`,
then `-mode seeds -seeds-addr 127.0.0.1:6394`), and inside the load tool's own process (the
default of `-mode seeds`). Three alternating rounds; each row is the round of median throughput.

| design | throughput (req/s) | p50 | p99 | p99.9 | max | orders | invariant checks |
|---|---|---|---|---|---|---|---|
| seckill-proxy | {proxy['throughput_rps']:.0f} | {lat(proxy)['p50']} µs | {lat(proxy)['p99']} µs | {lat(proxy)['p99_9']} µs | {lat(proxy)['max']} µs | {proxy['replies'].get('order', 0)} | {checks} |
| the seeds' design, a process of its own | {seeds['throughput_rps']:.0f} | {lat(seeds)['p50']} µs | {lat(seeds)['p99']} µs | {lat(seeds)['p99_9']} µs | {lat(seeds)['max']} µs | {seeds['replies'].get('order', 0)} | not checked (no sink, no outbox) |
| the seeds' design, in the load tool's process | {seedsin['throughput_rps']:.0f} | {lat(seedsin)['p50']} µs | {lat(seedsin)['p99']} µs | {lat(seedsin)['p99_9']} µs | {lat(seedsin)['max']} µs | {seedsin['replies'].get('order', 0)} | not checked |

proxy/seeds throughput ratio (the seeds' service a process of its own): **{proxy['throughput_rps'] / seeds['throughput_rps']:.2f}**;
against the seeds' service inside the load tool: {proxy['throughput_rps'] / seedsin['throughput_rps']:.2f} (in BENCHMARKS.md at {base}, in-process:
{old_seeds}; goal: at least 1.5). 97.5% of this sale's requests are sold-out answers, which
both designs give from memory after one read and before one write on the client's socket;
on this 2-core machine those two system calls are most of either side's cost, so the ratio
stays near 1 whatever the proxy saves on the 2,000 buys. What the ratio does
not show: the seeds' design loses an order whenever the Kafka send fails after Redis said yes;
the proxy's outbox keeps it.

## (d) Pass-through

`scripts/bench-passthrough.sh 200000 5`: `redis-benchmark -c 50 -n 200000 -r 100000 -t get|set -P 1|16`.
Standalone: seckill-proxy in standalone mode (its epoll event loop, the default; and with
`redis.event_loops=0`, a goroutine per client), twemproxy (Debian's nutcracker 0.5.0) and
direct, all in front of one redis-server. Cluster: seckill-proxy in front of the cluster (the
event loop, and without), against `redis-benchmark --cluster` straight to the masters. Medians
of 5 rounds, each round running every target once in turn.

{chr(10).join(passthrough[1:])}

The same ratios, before (BENCHMARKS.md at {base}, its own run) and after (this run):

| upstream | test | -P | proxy/twemproxy before | proxy/twemproxy after | proxy/direct before | proxy/direct after |
|---|---|---|---|---|---|---|
{chr(10).join(passcmp)}

## (e) The sink

| measure | orders/s |
|---|---|
| one `seckill-sink` process, Kafka to MariaDB with the hard stock constraint and the outcomes to Redis (`go test ./sink -bench 'BenchmarkSink$' -benchtime 100000x`) | {sink:.0f} |
| MySQL side alone, batches of 1,000 orders per transaction (`-bench BenchmarkPersist -benchtime 20000x`) | {batch:.0f} |
| MySQL side alone, one order per transaction (the anchor) | {single:.0f} |

batched/per-order ratio: **{batch / single:.1f}**. The dev stack's MariaDB runs with
`innodb_flush_log_at_trx_commit=2`; a durable production setting costs the per-order case most.

## (f) Drain time

From the last buy of the seeds' sale (c) until all 2,000 orders were in MySQL:
**{proxy.get('drain_ms', 0):.0f} ms**.

## (g) Large arguments and replies

`go test ./proxy -run XXX -bench BenchmarkLargeArgument -benchtime 5x`: one client sends a SET
of the size given, then a GET of it back, straight to the dev stack's redis-server and
through the proxy in front of it (the event loop), one after the other in one run; time per
command.

| size | SET redis | SET proxy | proxy/redis | GET redis | GET proxy | proxy/redis |
|---|---|---|---|---|---|---|
{chr(10).join(bigrows)}

## (h) The proxy's CPU per request

`scripts/bench-cpu.sh 100000 <binary> <loops> 3`: the proxy's user + system time from
`/proc/<pid>/stat` around `redis-benchmark -c 50 -n 100000 -P 1|16` of each request, in front
of the cluster; medians of 3 rounds. "before" is the proxy built from revision {base or 'the baseline'}
(`BENCH_BASELINE`; the last before the socket-free core, N event loops and buys on the loop),
"after" this tree with 1 event loop, and "2 loops" this tree with `redis.event_loops: 2`, all
in this run.

| request | -P | µs before | µs after | after/before | µs with 2 loops | req/s before | req/s after | req/s with 2 loops |
|---|---|---|---|---|---|---|---|---|
{chr(10).join(cpurows)}

CPU per successful BUY over CPU per pass-through GET, at `-P 1`: **{buy_get_new:.2f}** after,
{buy_get_base:.2f} before (goal: at most 2).

## (i) The seeds' stock script, recognised by the proxy

`scripts/bench-legacy.sh 200000 3`: `redis-benchmark -c 50 -n 200000 -r 100000000 -P 1|16` of
`EVALSHA <the seeds' buy script> 2 seckill:stock:<sku> seckill:buyers:<sku> __rand_int__ 1`
through the proxy (run as a SECKILL.BUY), of `SECKILL.BUY <sku> __rand_int__ 1` through the same
proxy, and of the same EVALSHA straight to the dev stack's standalone server (on a cluster no
master can run it: its two keys sit in different slots); medians of 3 rounds. The direct
script does less: no outbox, no order id, no Kafka.

{chr(10).join(legacy[1:])}

## (j) Admission: rate-limited buys against sold-out answers

From the (h) run of this tree (`scripts/bench-cpu.sh`, 1 event loop, medians of 3 rounds,
`redis-benchmark -c 50 -n 100000 -r 100000000`, `buy.compat_replies` on): a buy of a sale
warmed with `RATE 1 BURST 1` (every buy but about one a second is answered
`LIMITED rate`, with no Redis call), against a buy of a sold-out sale (answered from the
sold-out flag). The goal is limited at least as fast as sold out.

| -P | µs sold-out | µs limited | req/s sold-out | req/s limited | limited/sold-out req/s |
|---|---|---|---|---|---|
{chr(10).join(admrows)}

The admission check itself is `BenchmarkAdmitAllowed` below: an allowed buy through every
check (a deny list of 10,000 uids, a per-buyer limit, the flags, the known buyers, a sale rate
with tokens in hand); the goal is at most 150 ns and 0 allocations. `BenchmarkAdmitLimited` is
a buy refused by the rate.

## (k) What the metrics cost

`scripts/bench-cpu.sh 100000 <binary> 1 3`, run back to back in this run: "before" is the proxy
built from revision {mbase} (`BENCH_METRICS_BASELINE`, the last before `/metrics`), "after" this
tree, which records the BUY latency histogram on every buy (the counters are read only when
Prometheus scrapes). The goal: no more than 2% more CPU per request.

| request | -P | µs before | µs after | after/before | req/s before | req/s after | after/before |
|---|---|---|---|---|---|---|---|
{chr(10).join(mrows)}

## (l) Admission under its own rush

`scripts/bench-admission.sh 500 50 700000 100`: two proxies share a sale warmed with
`RATE 500 BURST 50`, and seckill-bench drives both flat out (700,000 requests on 100
connections split between them, no request rate), so that the lease calls for the rate's
tokens compete with the rush they govern. "delivered" is (orders - burst) / (rate x seconds);
the goal is at least 0.95, with no reply other than an order or `LIMITED`.

{open(f"{work}/admission.md").read().strip()}

## Go benchmarks of the hot paths

`go test ./guard ./sink -run XXX -bench 'ParseBuy|OrderID|BuySoldOut|SoldOutCheck|EncodeOrder|Admit' -benchtime 1000000x`

```
{''.join(hot).strip()}
```

`BuySoldOut` is the guard's whole sold-out path (flag, counters, reply): zero allocations.
Parsing a BUY allocates its sku and uid strings (2 allocations).
"""
open(out, "w").write(md)
print(f"wrote {out}", file=sys.stderr)
PY
