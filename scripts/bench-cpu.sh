#!/usr/bin/env bash
# bench-cpu.sh: the proxy's own CPU per request, read from /proc/<pid>/stat (user + system
# time) around a fixed number of requests of redis-benchmark -c 50, for a pass-through GET,
# a successful SECKILL.BUY, a sold-out one and one refused by its sale's rate (LIMITED), in
# front of the dev stack's cluster.
#
#   scripts/bench-cpu.sh [requests] [proxy binary] [event loops] [rounds]
#       (defaults: 100000, bin/seckill-proxy built from this tree, 1, 3)
#
# Prints a Markdown table: request, -P, CPU per request in microseconds and requests per
# second, each the median of the rounds (one run on a shared machine varies by tens of
# percent).
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$ROOT"
N=${1:-100000}
BIN=${2:-}
LOOPS=${3:-1}
ROUNDS=${4:-3}
PORT=${SECKILL_BENCH_PORT:-6398}

scripts/devstack.sh up >&2
eval "$(scripts/devstack.sh env)"
go build -o bin/ ./cmd/seckill-proxy ./cmd/seckill-bench
BIN=${BIN:-./bin/seckill-proxy}
# The schema first: on a new stack no proxy has run its migrations yet.
SECKILL_LOG_LEVEL=warn ./bin/seckill-proxy -migrate
run_id=$(date +%s%N)
SKU=cpu_$run_id
SOLD=cpusold_$run_id
LIM=cpulim_$run_id
mariadb --no-defaults -h 127.0.0.1 -u root seckill -e \
  "INSERT INTO seckill_items (sku, stock) VALUES ('$SKU', 100000000), ('$SOLD', 1), ('$LIM', 100000000)"
export SECKILL_KAFKA_TOPIC=bench.cpu.$run_id SECKILL_KAFKA_DEAD_LETTER_TOPIC=bench.cpu.$run_id.dlq
extra=()
if [[ $LOOPS != 1 ]]; then extra=(-redis.event_loops="$LOOPS"); fi
SECKILL_LISTEN=127.0.0.1:$PORT SECKILL_ADMIN_LISTEN= SECKILL_LOG_LEVEL=warn SECKILL_BUY_COMPAT_REPLIES=true \
  "$BIN" "${extra[@]}" &
pid=$!
cleanup() {
  kill "$pid" 2>/dev/null || true
  wait "$pid" 2>/dev/null || true
  for sku in "$SKU" "$SOLD" "$LIM"; do
    for k in $(./bin/seckill-bench -sku "$sku" -print-keys | cut -d" " -f2); do redis-cli -c -p 7000 del "$k" >/dev/null; done
    redis-cli -c -p 7000 srem seckill:sales "$sku" >/dev/null
  done
  mariadb --no-defaults -h 127.0.0.1 -u root seckill -e "DELETE FROM seckill_items WHERE sku IN ('$SKU', '$SOLD', '$LIM')"
}
trap cleanup EXIT
for _ in $(seq 100); do redis-cli -p "$PORT" ping >/dev/null 2>&1 && break; sleep 0.1; done
redis-cli -p "$PORT" seckill.warm "$SKU" >/dev/null
redis-cli -p "$PORT" seckill.warm "$SOLD" >/dev/null
redis-cli -p "$PORT" seckill.buy "$SOLD" first >/dev/null
# A proxy from before admission (make bench's baseline) knows no RATE: no LIMITED rows then.
limited=0
if [[ $(redis-cli -p "$PORT" seckill.warm "$LIM" RATE 1 BURST 1 2>&1) != *ERR* ]]; then limited=1; fi
redis-cli -p "$PORT" set cpu:key hello >/dev/null

ticks() { awk '{ print $14 + $15 }' "/proc/$pid/stat"; }
HZ=$(getconf CLK_TCK)
median() { sort -n | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }'; }
# measure NAME P ARGS...: one row, the median of ROUNDS runs.
measure() {
  local name=$1 P=$2; shift 2
  local t0 t1 rps cpus=() rpss=() i
  for ((i = 0; i < ROUNDS; i++)); do
    t0=$(ticks)
    rps=$(redis-benchmark -p "$PORT" -c 50 -n "$N" -r 100000000 -P "$P" --csv "$@" 2>/dev/null | awk -F'","' 'NR == 2 { print $2 + 0 }')
    t1=$(ticks)
    cpus+=("$(awk -v d="$((t1 - t0))" -v hz="$HZ" -v N="$N" 'BEGIN { printf "%.2f", d / hz * 1e6 / N }')")
    rpss+=("$rps")
  done
  printf '| %s | %s | %.1f | %.0f |\n' "$name" "$P" "$(printf '%s\n' "${cpus[@]}" | median)" "$(printf '%s\n' "${rpss[@]}" | median)"
}
# measure_pair NAME_A NAME_B P ARGS_A -- ARGS_B: two rows whose rounds alternate, A then B, so
# that a machine's drift over the run weighs on both alike.
measure_pair() {
  local na=$1 nb=$2 P=$3; shift 3
  local a=() b=() t0 t1 rps i
  while [[ $1 != -- ]]; do a+=("$1"); shift; done
  shift
  b=("$@")
  local ca=() ra=() cb=() rb=()
  for ((i = 0; i < ROUNDS; i++)); do
    for side in a b; do
      local -n args=$side
      t0=$(ticks)
      rps=$(redis-benchmark -p "$PORT" -c 50 -n "$N" -r 100000000 -P "$P" --csv "${args[@]}" 2>/dev/null | awk -F'","' 'NR == 2 { print $2 + 0 }')
      t1=$(ticks)
      local cpu
      cpu=$(awk -v d="$((t1 - t0))" -v hz="$HZ" -v N="$N" 'BEGIN { printf "%.2f", d / hz * 1e6 / N }')
      if [[ $side == a ]]; then ca+=("$cpu"); ra+=("$rps"); else cb+=("$cpu"); rb+=("$rps"); fi
    done
  done
  printf '| %s | %s | %.1f | %.0f |\n' "$na" "$P" "$(printf '%s\n' "${ca[@]}" | median)" "$(printf '%s\n' "${ra[@]}" | median)"
  printf '| %s | %s | %.1f | %.0f |\n' "$nb" "$P" "$(printf '%s\n' "${cb[@]}" | median)" "$(printf '%s\n' "${rb[@]}" | median)"
}
printf '| request | -P | CPU per request (µs) | requests/s |\n|---|---|---|---|\n'
measure "pass-through GET" 1 GET cpu:key
measure "pass-through GET" 16 GET cpu:key
measure "successful SECKILL.BUY" 1 SECKILL.BUY "$SKU" __rand_int__ 1
measure "successful SECKILL.BUY" 16 SECKILL.BUY "$SKU" __rand_int__ 1
if ((limited)); then
  measure_pair "sold-out SECKILL.BUY" "rate-limited SECKILL.BUY" 1 SECKILL.BUY "$SOLD" __rand_int__ 1 -- SECKILL.BUY "$LIM" __rand_int__ 1
  measure_pair "sold-out SECKILL.BUY" "rate-limited SECKILL.BUY" 16 SECKILL.BUY "$SOLD" __rand_int__ 1 -- SECKILL.BUY "$LIM" __rand_int__ 1
else
  measure "sold-out SECKILL.BUY" 1 SECKILL.BUY "$SOLD" __rand_int__ 1
  measure "sold-out SECKILL.BUY" 16 SECKILL.BUY "$SOLD" __rand_int__ 1
fi
