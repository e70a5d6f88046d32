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
# MBASE is the revision before the metrics: the (k) table measures what recording them costs.
MBASE=${BENCH_METRICS_BASELINE:-2ca946a}

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
# Each side's CPU per request over the sale (user + system time of the one process that
# serves it, from /proc), for table (n): seedscpu.tsv.
ticks() { awk '{ print $14 + $15 }' "/proc/$1/stat"; }
HZ=$(getconf CLK_TCK)
BUYERS=80000
printf 'proxy_us\tseeds_us\n' >"$WORK/seedscpu.tsv"
for round in 1 2 3; do
  t0=$(ticks $proxy_pid)
  ./bin/seckill-bench -addr 127.0.0.1:$PORT -sku bench_proxy "${SALE[@]}" -json >"$WORK/proxy.$round.json" 2>"$WORK/proxy.err" || { cat "$WORK/proxy.err" >&2; exit 1; }
  proxy_ticks=$(($(ticks $proxy_pid) - t0))
  ./bin/seckill-bench -serve-seeds 127.0.0.1:$SEEDS_PORT -sku bench_seeds -units 2000 2>"$WORK/seeds-service.err" &
  seeds_pid=$!
  for _ in $(seq 100); do redis-cli -p $SEEDS_PORT ping 2>/dev/null | grep -q ERR && break; sleep 0.1; done
  t0=$(ticks $seeds_pid)
  ./bin/seckill-bench -mode seeds -seeds-addr 127.0.0.1:$SEEDS_PORT -sku bench_seeds "${SALE[@]}" -check=false -json >"$WORK/seeds.$round.json" 2>"$WORK/seeds.err" || { cat "$WORK/seeds.err" "$WORK/seeds-service.err" >&2; exit 1; }
  seeds_ticks=$(($(ticks $seeds_pid) - t0))
  awk -v p="$proxy_ticks" -v s="$seeds_ticks" -v hz="$HZ" -v n="$BUYERS" 'BEGIN { printf "%.2f\t%.2f\n", p / hz * 1e6 / n, s / hz * 1e6 / n }' >>"$WORK/seedscpu.tsv"
  kill $seeds_pid && wait $seeds_pid || true
  ./bin/seckill-bench -mode seeds -sku bench_seeds_in "${SALE[@]}" -check=false -json >"$WORK/seedsin.$round.json" 2>"$WORK/seeds.err" || { cat "$WORK/seeds.err" >&2; exit 1; }
done
echo "== (s) the seeds' stock schemes side by side, on the same sale" >&2
# The schemes with a Redis master, each with its master failed over a quarter of the way
# through, three rounds, each shown; then every scheme without a fault, three rounds, each
# row the median; the chart (README's first screen links it) shows both.
./bin/seckill-bench schemes -addr 127.0.0.1:$PORT -schemes one-redis,proxy,proxy-buckets -failover -rounds 3 -sku bench_scheme_fo -json "$WORK/schemes-failover.json" -md "$WORK/schemes-failover.md"
./bin/seckill-bench schemes -addr 127.0.0.1:$PORT -rounds 3 -failover-json "$WORK/schemes-failover.json" -json "$WORK/schemes.json" -md "$WORK/schemes.md" -chart docs/schemes.svg
echo "== (w) the truthful buy: one-redis, the seeds, the proxy with WAIT and without; 200 and 1,000 buyers at once, quiet, and with a core busy" >&2
# A second proxy, with buy.wait_replicas 0, beside the first (the same sink); 100,000 units,
# 300,000 buyers, three rounds alternating, each row the median, with 200 buyers at once and
# with 1,000, each with where an order's CPU went (by process, and Redis's commands by node);
# then 200 at once with a shell loop keeping a core busy.
NOWAIT_PORT=6393
SECKILL_LISTEN=127.0.0.1:$NOWAIT_PORT SECKILL_ADMIN_LISTEN= SECKILL_LOG_LEVEL=warn SECKILL_BUY_WAIT_REPLICAS=0 ./bin/seckill-proxy &
nowait_pid=$!
for _ in $(seq 100); do redis-cli -p "$NOWAIT_PORT" ping >/dev/null 2>&1 && break; sleep 0.1; done
TRUTH=(-addr 127.0.0.1:$PORT -addr-nowait 127.0.0.1:$NOWAIT_PORT -schemes one-redis,seeds,proxy,proxy-nowait -units 100000 -buyers 300000 -rounds 3)
./bin/seckill-bench schemes "${TRUTH[@]}" -sku bench_truth -md "$WORK/truth.md" -account-md "$WORK/truth-account.md"
./bin/seckill-bench schemes "${TRUTH[@]}" -conns 1000 -sku bench_truth1k -md "$WORK/truth1k.md" -account-md "$WORK/truth1k-account.md"
sh -c 'while :; do :; done' &
hog=$!
./bin/seckill-bench schemes "${TRUTH[@]}" -sku bench_truth_busy -md "$WORK/truth-busy.md"
kill $hog $nowait_pid && wait $nowait_pid || true
# (p) The seeds' sale once more, every buyer with an order waiting for its outcome
# (SECKILL.STATUS ... WAIT): the time from buy to stored in MySQL.
./bin/seckill-bench -addr 127.0.0.1:$PORT -sku bench_outcome "${SALE[@]}" -wait-outcome 30s -json >"$WORK/outcome.json" 2>"$WORK/proxy.err" || { cat "$WORK/proxy.err" >&2; exit 1; }
# The sale's proxy and sink end here. Left idle, that proxy would lead its own topic's sweeping
# and read every open sale, each pass, beside table (q)'s proxies: twice (q)'s background.
kill $proxy_pid $sink_pid
wait $proxy_pid $sink_pid 2>/dev/null || true
trap - EXIT

# build_proxy REV NAME: the proxy of revision REV, built into $WORK/NAME-bin/.
build_proxy() {
  rm -rf "$WORK/$2-src" && mkdir -p "$WORK/$2-src"
  git archive "$1" | tar -x -C "$WORK/$2-src"
  (cd "$WORK/$2-src" && go build -o "$WORK/$2-bin/" ./cmd/seckill-proxy)
}

echo "== (n) what one request costs: redis-server, twemproxy and the proxy, with profiles" >&2
scripts/bench-cost.sh 100000 3

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
for proxies in 2 4; do
  for n in 300000 3000000; do
    echo "$proxies proxies, $n requests (a $((n / 100000)) s rush), one core kept busy:"
    echo
    ADMISSION_PROXIES=$proxies ADMISSION_SPLIT=1 ADMISSION_HOG=1 scripts/bench-admission.sh 500 50 "$n" 100
    echo
  done
done >"$WORK/admission-busy.md"

echo "== (m) a hot SKU over 1 and 3 stock buckets: per-master CPU, throughput, drain" >&2
scripts/bench-buckets.sh 100000 300000 >"$WORK/buckets.md"

echo "== (q) open sales nobody buys: 10, 1,000 and 10,000 sales, 1, 4 and 16 proxies" >&2
scripts/bench-idle.sh all >/dev/null

echo "== (r) buys spread over 1,000 SKUs against one SKU" >&2
scripts/bench-skus.sh 1000 200000 3 >/dev/null

echo "== (p) buyers waiting for their outcome against polling" >&2
SECKILL_REQUIRE_SERVICES=1 go test ./proxy -run XXX -bench BenchmarkStatusWait -benchtime 1x -count 3 -timeout 20m >"$WORK/statuswait.txt"

echo "== Go benchmarks of the hot paths" >&2
go test ./guard ./sink -run XXX -bench 'ParseBuy|OrderID|BuySoldOut|SoldOutCheck|EncodeOrder|Admit' -benchtime 1000000x >"$WORK/hot.txt"
# What an open sale costs a proxy's heap (B/sale), for 10,000 sales at a time.
go test ./guard -run XXX -bench 'SaleMemory' -benchtime 3x | grep '^Benchmark' >>"$WORK/hot.txt"

./bin/seckill-bench bench-report -work "$WORK" -out "$OUT" -n "$N" -base "$BASE" -metrics-base "$MBASE"

# Table (g)'s ratio check (a GET of 64 MiB at most 2x redis-server's time), once the report is
# written: a miss fails make bench.
if grep -q 'Ratio check: a GET of .*\*\*NOT met\*\*' "$OUT"; then
	echo "bench: table (g)'s ratio check is not met; see $OUT" >&2
	exit 1
fi
