#!/usr/bin/env bash
# bench-admission.sh: admission under its own rush. Two proxies share one sale's RATE and are
# driven flat out (no request rate); the sale must still sell at its rate: the lease calls for
# the rate's tokens must not starve behind the buys they govern.
#
#   scripts/bench-admission.sh [rate] [burst] [requests] [conns]
#       defaults: 500 50 400000 100
#
#   ADMISSION_SPLIT=1  each proxy driven by a load process of its own (half the requests and
#                      connections each), as on an event day, rather than one process for both
#   ADMISSION_HOG=1    a process keeps a core busy (a shell loop) for the whole run; ADMISSION_HOG=n, n
#                      such processes
#   ADMISSION_PROXIES=n  n proxies (default 2), each with its share of the requests and
#                      connections when split
#
# Prints the orders sold, the time, and delivered = (orders - burst) / (rate x seconds): the
# share of the rate the proxies delivered, burst aside (the goal is 0.95 or more); the worst
# 500 ms after the first (the goal: at least rate/4), the split of the orders between the load
# processes, the UNAVAILABLE replies and the others but an order or LIMITED (there should be
# none: no fault is injected), and each proxy's lease counters; then a sink stores the orders
# and seckill-bench check-together checks that MySQL confirms exactly the buyers told an order
# id, over every load process (the script exits 1 if not).
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$ROOT"
RATE=${1:-500}
BURST=${2:-50}
N=${3:-400000}
CONNS=${4:-100}
PORTS=()
for ((i = 0; i < ${ADMISSION_PROXIES:-2}; i++)); do PORTS+=($((6441 + i))); done

scripts/devstack.sh up >&2
eval "$(scripts/devstack.sh env)"
go build -o bin/ ./cmd/seckill-proxy ./cmd/seckill-bench

run_id=$(date +%s)
SKU=benchadm_$run_id
export SECKILL_KAFKA_TOPIC=bench.adm.$run_id SECKILL_KAFKA_DEAD_LETTER_TOPIC=bench.adm.$run_id.dlq SECKILL_KAFKA_GROUP=bench-adm-$run_id
WORK=$ROOT/.stack/bench-admission
mkdir -p "$WORK"
pids=()
for p in "${PORTS[@]}"; do
  SECKILL_LISTEN=127.0.0.1:$p SECKILL_ADMIN_LISTEN= SECKILL_LOG_LEVEL=warn ./bin/seckill-proxy >"$WORK/proxy-$p.log" 2>&1 &
  pids+=($!)
done
SECKILL_LOG_LEVEL=warn ./bin/seckill-sink >"$WORK/sink.log" 2>&1 &
pids+=($!)
cleanup() {
  kill "${pids[@]}" 2>/dev/null || true
  wait "${pids[@]}" 2>/dev/null || true
  for k in $(./bin/seckill-bench -sku "$SKU" -print-keys | cut -d" " -f2); do redis-cli -c -p 7000 del "$k" >/dev/null; done
  redis-cli -c -p 7000 srem seckill:sales "$SKU" >/dev/null
  mariadb --no-defaults -h 127.0.0.1 -u root seckill -e "DELETE FROM seckill_items WHERE sku = '$SKU'; DELETE FROM seckill_orders WHERE sku = '$SKU'"
}
trap cleanup EXIT
for p in "${PORTS[@]}"; do
  for _ in $(seq 100); do redis-cli -p "$p" ping >/dev/null 2>&1 && break; sleep 0.1; done
done

for ((i = 0; i < ${ADMISSION_HOG:-0}; i++)); do
  sh -c 'while :; do :; done' &
  pids+=($!)
done
addrs=$(printf '127.0.0.1:%s,' "${PORTS[@]}")
reports=$WORK/report.json
rm -f "$WORK"/orders-*.txt
orders=
if [[ ${ADMISSION_SPLIT:-0} == 1 ]]; then
  # The sale is warmed through the first proxy (seckill-bench's setup); each process then
  # drives its own proxy, with buyers of its own (-uid-prefix), flat out.
  ./bin/seckill-bench -addr "127.0.0.1:${PORTS[0]}" -sku "$SKU" -units 100000000 -sale-rate "$RATE" -sale-burst "$BURST" \
    -buyers 1 -conns 1 -check=false -orders-out "$WORK/orders-warm.txt" -json >/dev/null 2>"$WORK/warm.log"
  orders=$WORK/orders-warm.txt
  reports=
  loads=()
  for i in "${!PORTS[@]}"; do
    ./bin/seckill-bench -addr "127.0.0.1:${PORTS[$i]}" -sku "$SKU" -no-setup -uid-prefix "p$i-" \
      -buyers $((N / ${#PORTS[@]})) -conns $((CONNS / ${#PORTS[@]})) -check=false -orders-out "$WORK/orders-$i.txt" -json >"$WORK/report-$i.json" 2>"$WORK/bench-$i.log" &
    loads+=($!)
    reports+=${reports:+,}$WORK/report-$i.json
    orders+=,$WORK/orders-$i.txt
  done
  wait "${loads[@]}"
else
  ./bin/seckill-bench -addr "${addrs%,}" -sku "$SKU" -units 100000000 -sale-rate "$RATE" -sale-burst "$BURST" \
    -buyers "$N" -conns "$CONNS" -check=false -orders-out "$WORK/orders-0.txt" -json >"$WORK/report.json" 2>"$WORK/bench.log"
  orders=$WORK/orders-0.txt
fi

lease() { redis-cli -p "$1" seckill.info | awk '/^rate_lease/ { k = $0; getline; printf "%s=%s ", k, $0 }'; }
./bin/seckill-bench admission-table -report "$reports" -rate "$RATE" -burst "$BURST"
for p in "${PORTS[@]}"; do echo "proxy :$p $(lease "$p")"; done
if [[ ${ADMISSION_SPLIT:-0} == 1 ]]; then # the split between the proxies, each process's own
  for i in "${!PORTS[@]}"; do
    echo "load $i (proxy :${PORTS[$i]}): $(./bin/seckill-bench admission-table -report "$WORK/report-$i.json" -rate "$RATE" -burst 0 | tail -1)"
  done
fi
# MySQL, once the sink has stored them: exactly the orders told, none missing, none more.
./bin/seckill-bench check-together -sku "$SKU" -units 100000000 -orders "$orders" >"$WORK/check.txt" 2>"$WORK/check.log" || {
  rc=$?
  cat "$WORK/check.txt" "$WORK/check.log" >&2
  exit "$rc"
}
echo "MySQL: $(grep -c PASS "$WORK/check.txt") checks pass over $(cat ${orders//,/ } | wc -l) orders told"
