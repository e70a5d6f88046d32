#!/usr/bin/env bash
# bench-cost.sh: what one request costs each server that handles it, against C servers doing
# the same job, in one run: redis-server answering GET, twemproxy (nutcracker) forwarding GET
# to it, and seckill-proxy forwarding GET to it, to the cluster (one event loop, and two),
# answering a sold-out SECKILL.BUY from memory and selling with SECKILL.BUY.
#
#   scripts/bench-cost.sh [requests] [rounds]     (defaults: 100000, 3)
#
# Each row is redis-benchmark -c 50 -n REQUESTS at -P 1 and -P 16, on keys key:0..99999 set
# beforehand (GET key:__rand_int__ -r 100000; for one master's row, {k}:0..99999) or buyers'
# uids from 100,000,000, and its cost is the CPU time of the one process
# that serves it, per request: user + system time from /proc/<pid>/stat, or INFO cpu for
# redis-server. Every round runs every row once, in the same order, so that the machine's
# drift weighs on all rows alike; each row is the median of the rounds.
#
# Writes $WORK/cost.tsv (row, -P, each round's µs, each round's req/s, each round's p99 ms) and, unless
# BENCH_PROFILE=0, one CPU profile per seckill-proxy row at -P 1 and -P 16
# ($WORK/cost.<row>.<P>.pprof), taken in a run of its own after the measured rounds (the
# profiler costs CPU too).
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$ROOT"
N=${1:-100000}
ROUNDS=${2:-3}
WORK=${BENCH_WORK:-$ROOT/.stack/bench}
PROFILE=${BENCH_PROFILE:-1}
mkdir -p "$WORK"

scripts/devstack.sh up >&2
eval "$(scripts/devstack.sh env)"
command -v nutcracker >/dev/null || {
  echo "installing nutcracker (twemproxy) with apt-get" >&2
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq >/dev/null
  apt-get install -y -qq --no-install-recommends nutcracker >/dev/null
}
go build -o bin/ ./cmd/seckill-proxy ./cmd/seckill-bench
# The schema first: on a new stack no proxy has run its migrations yet.
SECKILL_LOG_LEVEL=warn ./bin/seckill-proxy -migrate

STANDALONE=127.0.0.1:7010
TW_PORT=22131
SP_PORT=6401 # the proxy in front of the standalone server
CP_PORT=6402 # the proxy in front of the cluster, one event loop
C2_PORT=6403 # the proxy in front of the cluster, two event loops
C0_PORT=6404 # the proxy in front of the cluster, buy.wait_replicas 0 (a buy told before a replica holds it)
run_id=$(date +%s%N)
SKU=cost_$run_id
SOLD=costsold_$run_id
mariadb --no-defaults -h 127.0.0.1 -u root seckill -e \
  "INSERT INTO seckill_items (sku, stock) VALUES ('$SKU', 100000000), ('$SOLD', 1)"
# A topic of this run's own, so that a sink on the default topic never sees these orders.
export SECKILL_KAFKA_TOPIC=bench.cost.$run_id SECKILL_KAFKA_DEAD_LETTER_TOPIC=bench.cost.$run_id.dlq

cat >"$WORK/cost-nutcracker.yml" <<EOF
cost:
  listen: 127.0.0.1:$TW_PORT
  hash: fnv1a_64
  distribution: ketama
  redis: true
  servers:
    - $STANDALONE:1
EOF
pids=()
nutcracker -c "$WORK/cost-nutcracker.yml" -o "$WORK/cost-nutcracker.log" &
tw_pid=$!
pids+=("$tw_pid")
# proxy PORT ADMIN_PORT ENV...: a proxy with its admin port on loopback (pprof), and the
# compatibility replies (1, 0, -1) that keep redis-benchmark going past a duplicate buyer. No
# sink runs here, so no order ever gets its outcome, and the late-order watch would scan the
# buy row's hundreds of thousands of buyers every 30 s, a cost of the missing sink rather than
# of a request: outbox.late_after is 1 h, so that it does not run while the rows are measured.
proxy() {
  local port=$1 admin=$2; shift 2
  env SECKILL_LISTEN=127.0.0.1:$port SECKILL_ADMIN_LISTEN=127.0.0.1:$admin SECKILL_LOG_LEVEL=warn \
    SECKILL_BUY_COMPAT_REPLIES=true SECKILL_OUTBOX_LATE_AFTER=1h "$@" ./bin/seckill-proxy &
  pids+=($!)
}
proxy $SP_PORT 6411 SECKILL_REDIS_MODE=standalone SECKILL_REDIS_ADDRS=$STANDALONE
sp_pid=${pids[-1]}
proxy $CP_PORT 6412 SECKILL_REDIS_EVENT_LOOPS=1
cp_pid=${pids[-1]}
proxy $C2_PORT 6413 SECKILL_REDIS_EVENT_LOOPS=2
c2_pid=${pids[-1]}
proxy $C0_PORT 6414 SECKILL_REDIS_EVENT_LOOPS=1 SECKILL_BUY_WAIT_REPLICAS=0
c0_pid=${pids[-1]}
cleanup() {
  kill "${pids[@]}" 2>/dev/null || true
  wait "${pids[@]}" 2>/dev/null || true
  for sku in "$SKU" "$SOLD"; do
    for k in $(./bin/seckill-bench -sku "$sku" -print-keys | cut -d" " -f2); do redis-cli -c -p 7000 del "$k" >/dev/null; done
    redis-cli -c -p 7000 srem seckill:sales "$sku" >/dev/null
  done
  mariadb --no-defaults -h 127.0.0.1 -u root seckill -e "DELETE FROM seckill_items WHERE sku IN ('$SKU', '$SOLD')"
}
trap cleanup EXIT
for port in $TW_PORT $SP_PORT $CP_PORT $C2_PORT $C0_PORT; do
  for _ in $(seq 100); do redis-cli -p "$port" ping >/dev/null 2>&1 && break; sleep 0.1; done
done
for pid in "${pids[@]}"; do # a port already taken by something else would be measured instead
  kill -0 "$pid" 2>/dev/null || { echo "bench-cost: process $pid did not start" >&2; exit 1; }
done
redis-cli -p $CP_PORT seckill.warm "$SKU" >/dev/null
redis-cli -p $CP_PORT seckill.warm "$SOLD" >/dev/null
redis-cli -p $CP_PORT seckill.buy "$SOLD" first >/dev/null
# The keys every GET row reads, with a value of 3 bytes, on the standalone server and over
# the cluster.
redis-benchmark -h 127.0.0.1 -p 7010 -c 50 -n 300000 -r 100000 -P 16 -d 3 -t set -q >/dev/null
redis-benchmark -p 7000 --cluster -c 50 -n 300000 -r 100000 -P 16 -d 3 -t set -q >/dev/null
# And keys that all hash to one slot, for the cluster's row without the spread over masters.
redis-benchmark -p $CP_PORT -c 50 -n 300000 -r 100000 -P 16 -q SET '{k}:__rand_int__' xyz >/dev/null

HZ=$(getconf CLK_TCK)
# cpu WHO: the CPU seconds so far of a process id, or of redis-server at the standalone port.
cpu() {
  if [[ $1 == redis ]]; then
    redis-cli -p 7010 info cpu | tr -d '\r' | awk -F: '/^used_cpu_(sys|user):/ { s += $2 } END { printf "%.6f\n", s }'
  else
    awk -v hz="$HZ" '{ printf "%.6f\n", ($14 + $15) / hz }' "/proc/$1/stat"
  fi
}
# bench PORT P ARGS...: redis-benchmark's requests per second, and its p99 latency in ms. GET's keys are the 100,000 set
# above; a buy's uids are drawn from 100,000,000, so that nearly every buy is a new buyer's
# (from 100,000 the sale would soon answer duplicates from memory).
bench() {
  local port=$1 P=$2 range=100000; shift 2
  if [[ $1 == SECKILL.BUY ]]; then range=100000000; fi
  redis-benchmark -p "$port" -c 50 -n "$N" -r "$range" -P "$P" --csv "$@" 2>/dev/null |
    awk -F'","' 'NR == 2 { print $2 + 0, $7 + 0 }'
}
# The rows: name, the process whose CPU counts, the port, the command.
ROWS=(
  "redis-get|redis|7010|GET key:__rand_int__"
  "twemproxy-get|$tw_pid|$TW_PORT|GET key:__rand_int__"
  "standalone-get|$sp_pid|$SP_PORT|GET key:__rand_int__"
  "cluster-onekey-get|$cp_pid|$CP_PORT|GET {k}:__rand_int__"
  "cluster-get|$cp_pid|$CP_PORT|GET key:__rand_int__"
  "cluster-get-2loops|$c2_pid|$C2_PORT|GET key:__rand_int__"
  "soldout-buy|$cp_pid|$CP_PORT|SECKILL.BUY $SOLD __rand_int__ 1"
  "buy|$cp_pid|$CP_PORT|SECKILL.BUY $SKU __rand_int__ 1"
  "buy-nowait|$c0_pid|$C0_PORT|SECKILL.BUY $SKU __rand_int__ 1"
)
declare -A cpus rpss p99s
for ((round = 1; round <= ROUNDS; round++)); do
  echo "bench-cost: round $round of $ROUNDS" >&2
  for P in 1 16; do
    for row in "${ROWS[@]}"; do
      IFS='|' read -r name who port cmd <<<"$row"
      read -ra args <<<"$cmd"
      c0=$(cpu "$who")
      read -r rps p99 < <(bench "$port" "$P" "${args[@]}")
      c1=$(cpu "$who")
      p99s[$name.$P]+=" $p99"
      cpus[$name.$P]+=" $(awk -v a="$c0" -v b="$c1" -v n="$N" 'BEGIN { printf "%.3f", (b - a) * 1e6 / n }')"
      rpss[$name.$P]+=" $rps"
    done
  done
done
{
  printf 'row\tP\tcpu_us\trps\tp99_ms\n'
  for row in "${ROWS[@]}"; do
    name=${row%%|*}
    for P in 1 16; do printf '%s\t%s\t%s\t%s\t%s\n' "$name" "$P" "${cpus[$name.$P]# }" "${rpss[$name.$P]# }" "${p99s[$name.$P]# }"; done
  done
} >"$WORK/cost.tsv"

if [[ $PROFILE != 0 ]]; then
  # profile NAME ADMIN PORT P ARGS...: a CPU profile of the proxy over one longer run.
  profile() {
    local name=$1 admin=$2 port=$3 P=$4; shift 4
    local secs=4
    curl -sf -o "$WORK/cost.$name.$P.pprof" "http://127.0.0.1:$admin/debug/pprof/profile?seconds=$secs" &
    local curl_pid=$!
    local end=$((SECONDS + secs))
    while ((SECONDS < end)) && kill -0 "$curl_pid" 2>/dev/null; do bench "$port" "$P" "$@" >/dev/null; done
    wait "$curl_pid"
  }
  for P in 1 16; do
    profile standalone-get 6411 $SP_PORT $P GET key:__rand_int__
    profile cluster-onekey-get 6412 $CP_PORT $P GET '{k}:__rand_int__'
    profile cluster-get 6412 $CP_PORT $P GET key:__rand_int__
    profile cluster-get-2loops 6413 $C2_PORT $P GET key:__rand_int__
    profile soldout-buy 6412 $CP_PORT $P SECKILL.BUY "$SOLD" __rand_int__ 1
    profile buy 6412 $CP_PORT $P SECKILL.BUY "$SKU" __rand_int__ 1
  done
fi
echo "bench-cost: $WORK/cost.tsv" >&2
