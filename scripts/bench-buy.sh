#!/usr/bin/env bash
# bench-buy.sh: SECKILL.BUY through the proxy against EVALSHA of the same script sent directly
# to the master that owns the SKU, with redis-benchmark, in one run on one machine.
#
#   scripts/bench-buy.sh [requests] [rounds]     (defaults: 300000 per measurement, 3 rounds)
#
# Prints a table of requests per second and the proxy/direct ratio, at -P 1 and -P 16, for a
# buy that succeeds (large stock) and for a sold-out SKU (the proxy answers from its flag).
# Proxy and direct runs alternate, ROUNDS times each; the table shows medians, since one run on
# a shared 2-core machine varies by tens of percent.
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$ROOT"
N=${1:-300000}
ROUNDS=${2:-3}
CLIENTS=50
PORT=${SECKILL_BENCH_PORT:-6390}

scripts/devstack.sh up
eval "$(scripts/devstack.sh env)"
go build -o bin/ ./cmd/seckill-proxy ./cmd/seckill-bench
# The schema first: on a new stack no proxy has run its migrations yet.
SECKILL_LOG_LEVEL=warn ./bin/seckill-proxy -migrate

run_id=$(date +%s)
SKU=bench_$run_id
SOLD=benchsold_$run_id
# Direct EVALSHA runs on SKUs of their own, kept out of the sweepers' set: their outbox entries
# are never published, and a sweeper republishing them would load the proxy under test.
DSKU=benchdirect_$run_id
DSOLD=benchdirectsold_$run_id
SKUS=("$SKU" "$SOLD" "$DSKU" "$DSOLD")
mariadb --no-defaults -h 127.0.0.1 -u root seckill -e \
  "INSERT INTO seckill_items (sku, stock) VALUES ('$SKU', 100000000), ('$SOLD', 1), ('$DSKU', 100000000), ('$DSOLD', 1)"
# A topic of this run's own, so that a sink consuming the default topic never sees these orders.
export SECKILL_KAFKA_TOPIC=bench.buy.$run_id SECKILL_KAFKA_DEAD_LETTER_TOPIC=bench.buy.$run_id.dlq
# The route WARM records (sale.Route), which the direct EVALSHA passes as the proxy does.
ROUTE="topic=$SECKILL_KAFKA_TOPIC schema=1"

# Compatibility replies (1, 0, -1) keep redis-benchmark, which stops at the first error reply,
# running when two random uids collide and the second buy is a duplicate.
SECKILL_LISTEN=127.0.0.1:$PORT SECKILL_ADMIN_LISTEN= SECKILL_LOG_LEVEL=warn SECKILL_BUY_COMPAT_REPLIES=true ./bin/seckill-proxy &
proxy_pid=$!
cleanup() {
  kill "$proxy_pid" 2>/dev/null || true
  wait "$proxy_pid" 2>/dev/null || true
  for sku in "${SKUS[@]}"; do
    for k in $(./bin/seckill-bench -sku "$sku" -print-keys | cut -d" " -f2); do redis-cli -c -p 7000 del "$k" >/dev/null; done
    redis-cli -c -p 7000 srem seckill:sales "$sku" >/dev/null
  done
  mariadb --no-defaults -h 127.0.0.1 -u root seckill -e "DELETE FROM seckill_items WHERE sku IN ('$SKU', '$SOLD', '$DSKU', '$DSOLD')"
}
trap cleanup EXIT
for _ in $(seq 100); do redis-cli -p "$PORT" ping >/dev/null 2>&1 && break; sleep 0.1; done

for sku in "${SKUS[@]}"; do redis-cli -p "$PORT" seckill.warm "$sku" >/dev/null; done
redis-cli -p "$PORT" seckill.buy "$SOLD" first >/dev/null
redis-cli -p "$PORT" seckill.buy "$DSOLD" first >/dev/null
redis-cli -c -p 7000 srem seckill:sales "$DSKU" "$DSOLD" >/dev/null

# The master that owns a SKU, and the script's SHA loaded there.
master_port() { ./bin/seckill-bench owner -sku "$1" | cut -d: -f2; }
keys() { ./bin/seckill-bench -sku "$1" -print-script-keys; }
MPORT=$(master_port "$DSKU")
SPORT=$(master_port "$DSOLD")
SHA=$(redis-cli -p "$MPORT" script load "$(cat guard/lua/buy.lua)")
redis-cli -p "$SPORT" script load "$(cat guard/lua/buy.lua)" >/dev/null

rps() { # rps PORT PIPELINE ARGS...: requests per second
  local port=$1 pipe=$2; shift 2
  redis-benchmark -p "$port" -c "$CLIENTS" -n "$N" -r 100000000 -P "$pipe" --csv "$@" 2>/dev/null |
    awk -F'","' 'NR == 2 { print $2 + 0 }'
}

row() { awk -v n="$1" -v P="$2" -v p="$3" -v d="$4" 'BEGIN { printf "| %s | %s | %.0f | %.0f | %.2f |\n", n, P, p, d, p / d }'; }

printf '# %s, %s cores, %d requests, %d clients, median of %d rounds\n' "$(date -u +%Y-%m-%dT%H:%MZ)" "$(nproc)" "$N" "$CLIENTS" "$ROUNDS"
printf '| path | -P | proxy rps | direct rps | proxy/direct |\n|---|---|---|---|---|\n'
median() { sort -n | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }'; }

# measure NAME SKU DIRECT_SKU MASTER_PORT: one table row per pipeline depth.
measure() {
  local name=$1 sku=$2 dsku=$3 mport=$4 P i ps ds
  for P in 1 16; do
    ps=() ds=()
    for ((i = 0; i < ROUNDS; i++)); do
      ps+=("$(rps "$PORT" "$P" SECKILL.BUY "$sku" __rand_int__ 1)")
      # shellcheck disable=SC2046
      ds+=("$(rps "$mport" "$P" EVALSHA "$SHA" 7 $(keys "$dsku") "" "$ROUTE" 0 __rand_int__ 1 direct bench)")
    done
    row "$name" "$P" "$(printf '%s\n' "${ps[@]}" | median)" "$(printf '%s\n' "${ds[@]}" | median)"
  done
}
measure buy "$SKU" "$DSKU" "$MPORT"
measure "sold out" "$SOLD" "$DSOLD" "$SPORT"
