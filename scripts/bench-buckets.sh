#!/usr/bin/env bash
# bench-buckets.sh [UNITS] [BUYERS]: a hot sale with 1 and with 3 stock buckets (SECKILL.WARM
# ... BUCKETS), in one run, as a Markdown table on stdout.
#
# Load per master: a proxy and a sink of their own (topic and group of this run), and for each
# k a sale of UNITS units (100,000) bought by BUYERS buyers (300,000) over 200 connections;
# each master's CPU (used_cpu_user + used_cpu_sys of INFO cpu) is read before and after, and
# the table gives the Redis CPU per buy attempt summed over the masters, the busiest master's
# share of it, and the sale's throughput (seckill-bench's own line).
#
# Drain: for each k and for one and two sinks in one group, a sale of UNITS units with no sink
# running (every buyer gets one unit, so the orders wait in Kafka), then the sinks started;
# orders a second from the first stored order to the last (MySQL's count of the sale's
# orders, polled), which leaves out the group's join.
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$ROOT"
UNITS=${1:-100000}
BUYERS=${2:-300000}
PORT=6396
eval "$(scripts/devstack.sh env)"
go build -o bin/ ./cmd/seckill-proxy ./cmd/seckill-sink ./cmd/seckill-bench
run_id=$(date +%s)
export SECKILL_KAFKA_TOPIC=bench.buckets.$run_id SECKILL_KAFKA_DEAD_LETTER_TOPIC=bench.buckets.$run_id.dlq \
  SECKILL_KAFKA_GROUP=bench-buckets-$run_id SECKILL_LOG_LEVEL=warn
sinks=()
start_sinks() { # start_sinks N
  for ((i = 0; i < $1; i++)); do
    SECKILL_SINK_ADMIN_LISTEN= ./bin/seckill-sink &
    sinks+=($!)
  done
}
stop_sinks() {
  [[ ${#sinks[@]} -gt 0 ]] || return 0
  kill "${sinks[@]}" 2>/dev/null || true
  wait "${sinks[@]}" 2>/dev/null || true
  sinks=()
}
proxy_pid=
trap 'stop_sinks; [[ -z $proxy_pid ]] || { kill $proxy_pid 2>/dev/null; wait $proxy_pid 2>/dev/null; } || true' EXIT
# The sink first: it creates the run's topic with kafka.partitions, which WARM spreads a split
# sale's buckets over; a producer first would have the broker create it with its default.
start_sinks 1
sleep 3
SECKILL_LISTEN=127.0.0.1:$PORT SECKILL_ADMIN_LISTEN= ./bin/seckill-proxy &
proxy_pid=$!
for _ in $(seq 100); do redis-cli -p "$PORT" ping >/dev/null 2>&1 && break; sleep 0.1; done

masters() { for p in 7000 7001 7002 7003 7004 7005; do [[ $(redis-cli -p "$p" role | head -1) == master ]] && echo "$p"; done; }
cpu_of() { redis-cli -p "$1" info cpu | awk -F: '/^used_cpu_(sys|user):/ { s += $2 } END { printf "%.6f", s }'; }
orders() { mysql -h 127.0.0.1 -u root -N -e "SELECT COUNT(*) FROM seckill.seckill_orders WHERE sku = '$1'"; }
clear_sale() {
  mysql -h 127.0.0.1 -u root -e "DELETE FROM seckill.seckill_orders WHERE sku = '$1'; DELETE FROM seckill.seckill_item_buckets WHERE sku = '$1'"
}

echo "| buckets | throughput (req/s) | Redis CPU per attempt, summed over masters (µs) | busiest master's share | each master's CPU (s) |"
echo "|---|---|---|---|---|"
for k in 1 3; do
  sku=bench_buckets_${k}_$run_id
  clear_sale "$sku"
  mapfile -t ms < <(masters)
  declare -A before=()
  for p in "${ms[@]}"; do before[$p]=$(cpu_of "$p"); done
  out=$(./bin/seckill-bench -addr 127.0.0.1:$PORT -sku "$sku" -units "$UNITS" -buyers "$BUYERS" -conns 200 -buckets "$k" -drain-timeout 5m 2>/dev/null) || {
    echo "$out" >&2
    exit 1
  }
  tput=$(awk '$1 == "throughput" { print $2 }' <<<"$out")
  used=()
  for p in "${ms[@]}"; do used+=("$p $(awk -v a="${before[$p]}" -v b="$(cpu_of "$p")" 'BEGIN { printf "%.3f", b - a }')"); done
  printf '%s\n' "${used[@]}" | awk -v k="$k" -v t="$tput" -v n="$BUYERS" '
    { sum += $2; if ($2 > top) top = $2; each = each sep $1 ": " $2; sep = ", " }
    END { printf "| %d | %s | %.1f | %.0f%% | %s |\n", k, t, sum / n * 1e6, top / sum * 100, each }'
done
stop_sinks

echo
echo "| buckets | sinks | orders | drain (s) | orders/s |"
echo "|---|---|---|---|---|"
for k in 1 3; do
  for n in 1 2; do
    sku=bench_drain_${k}_${n}_$run_id
    clear_sale "$sku"
    ./bin/seckill-bench -addr 127.0.0.1:$PORT -sku "$sku" -units "$UNITS" -buyers "$UNITS" -conns 200 -buckets "$k" -check=false >/dev/null 2>&1
    start_sinks "$n"
    first=""
    for _ in $(seq 6000); do
      got=$(orders "$sku")
      now=$(date +%s.%N)
      [[ -z $first && $got -gt 0 ]] && first=$now
      [[ $got -ge $UNITS ]] && break
      sleep 0.05
    done
    stop_sinks
    awk -v k="$k" -v n="$n" -v u="$UNITS" -v a="$first" -v b="$now" -v got="$got" \
      'BEGIN { d = b - a; printf "| %d | %d | %d | %.2f | %.0f |\n", k, n, got, d, (d > 0 ? got / d : 0) }'
  done
done
