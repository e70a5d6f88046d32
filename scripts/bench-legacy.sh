#!/usr/bin/env bash
# bench-legacy.sh: the seeds' stock script (EVALSHA, recognised and run as a buy) through the
# proxy, against SECKILL.BUY through the same proxy, and against the same EVALSHA straight to a
# Redis server, with redis-benchmark, in one run.
#
#   scripts/bench-legacy.sh [requests] [rounds]     (defaults: 200000, 3; medians)
#
# The proxy is in front of the dev stack's cluster. "direct" runs the script on the dev
# stack's standalone server (:7010): on a cluster the seeds' two keys sit in different slots,
# so no master can run it. Compatibility replies keep redis-benchmark going past a duplicate.
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$ROOT"
N=${1:-200000}
ROUNDS=${2:-3}
CLIENTS=50
PORT=${SECKILL_BENCH_PORT:-6389}

scripts/devstack.sh up >&2
eval "$(scripts/devstack.sh env)"
go build -o bin/ ./cmd/seckill-proxy ./cmd/seckill-bench
# The schema first: on a new stack no proxy has run its migrations yet.
SECKILL_LOG_LEVEL=warn ./bin/seckill-proxy -migrate

run_id=$(date +%s)
LSKU=benchlegacy_$run_id
BSKU=benchbuy_$run_id
DSKU=benchlegacydirect_$run_id
mariadb --no-defaults -h 127.0.0.1 -u root seckill -e \
  "INSERT INTO seckill_items (sku, stock) VALUES ('$LSKU', 100000000), ('$BSKU', 100000000)"
export SECKILL_KAFKA_TOPIC=bench.legacy.$run_id SECKILL_KAFKA_DEAD_LETTER_TOPIC=bench.legacy.$run_id.dlq
SECKILL_LISTEN=127.0.0.1:$PORT SECKILL_ADMIN_LISTEN= SECKILL_LOG_LEVEL=warn SECKILL_BUY_COMPAT_REPLIES=true ./bin/seckill-proxy &
proxy_pid=$!
cleanup() {
  kill "$proxy_pid" 2>/dev/null || true
  wait "$proxy_pid" 2>/dev/null || true
  for sku in "$LSKU" "$BSKU"; do
    for k in $(./bin/seckill-bench -sku "$sku" -print-keys | cut -d" " -f2); do redis-cli -c -p 7000 del "$k" >/dev/null; done
    redis-cli -c -p 7000 srem seckill:sales "$sku" >/dev/null
  done
  redis-cli -p 7010 del "seckill:stock:$DSKU" "seckill:buyers:$DSKU" >/dev/null
  mariadb --no-defaults -h 127.0.0.1 -u root seckill -e "DELETE FROM seckill_items WHERE sku IN ('$LSKU', '$BSKU')"
}
trap cleanup EXIT
for _ in $(seq 100); do redis-cli -p "$PORT" ping >/dev/null 2>&1 && break; sleep 0.1; done
redis-cli -p "$PORT" seckill.warm "$LSKU" >/dev/null
redis-cli -p "$PORT" seckill.warm "$BSKU" >/dev/null
BODY=$(cat router/lua/seeds_buy.lua)
SHA=$(redis-cli -p "$PORT" script load "$BODY") # the proxy learns it; Redis answers its SHA1
redis-cli -p 7010 script load "$BODY" >/dev/null
redis-cli -p 7010 set "seckill:stock:$DSKU" 100000000 >/dev/null

rps() { # rps PORT PIPELINE ARGS...: requests per second
  local port=$1 pipe=$2; shift 2
  redis-benchmark -p "$port" -c "$CLIENTS" -n "$N" -r 100000000 -P "$pipe" --csv "$@" 2>/dev/null |
    awk -F'","' 'NR == 2 { print $2 + 0 }'
}
median() { sort -n | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }'; }

printf '# %s, %s cores, %d requests, %d clients, median of %d rounds\n' "$(date -u +%Y-%m-%dT%H:%MZ)" "$(nproc)" "$N" "$CLIENTS" "$ROUNDS"
printf '| -P | legacy EVALSHA via proxy | SECKILL.BUY via proxy | EVALSHA direct | legacy/BUY | legacy/direct |\n|---|---|---|---|---|---|\n'
for P in 1 16; do
  ls=() bs=() ds=()
  for ((i = 0; i < ROUNDS; i++)); do
    ls+=("$(rps "$PORT" "$P" EVALSHA "$SHA" 2 "seckill:stock:$LSKU" "seckill:buyers:$LSKU" __rand_int__ 1)")
    bs+=("$(rps "$PORT" "$P" SECKILL.BUY "$BSKU" __rand_int__ 1)")
    ds+=("$(rps 7010 "$P" EVALSHA "$SHA" 2 "seckill:stock:$DSKU" "seckill:buyers:$DSKU" __rand_int__ 1)")
  done
  l=$(printf '%s\n' "${ls[@]}" | median) b=$(printf '%s\n' "${bs[@]}" | median) d=$(printf '%s\n' "${ds[@]}" | median)
  awk -v P="$P" -v l="$l" -v b="$b" -v d="$d" 'BEGIN { printf "| %s | %.0f | %.0f | %.0f | %.2f | %.2f |\n", P, l, b, d, l / b, l / d }'
done
