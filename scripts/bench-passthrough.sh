#!/usr/bin/env bash
# bench-passthrough.sh: GET and SET through seckill-proxy against direct Redis and against
# twemproxy (Debian's nutcracker), in one run, with redis-benchmark -c 50 at -P 1 and -P 16.
#
#   scripts/bench-passthrough.sh [requests] [rounds]   (defaults: 200000, 3; medians)
#
# Standalone: the proxy in standalone mode (its event loop, and with redis.event_loops=0 a
# goroutine per client), twemproxy and direct, all in front of the dev stack's plain server on
# :7010. Cluster: the proxy in front of the cluster (the event loop, and without), against
# redis-benchmark --cluster straight to the masters.
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$ROOT"
N=${1:-200000}
ROUNDS=${2:-3}
WORK=$ROOT/.stack/bench
mkdir -p "$WORK"

scripts/devstack.sh up
eval "$(scripts/devstack.sh env)"
command -v nutcracker >/dev/null || {
  echo "installing nutcracker (twemproxy) with apt-get" >&2
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq >/dev/null
  apt-get install -y -qq --no-install-recommends nutcracker >/dev/null
}
go build -o bin/ ./cmd/seckill-proxy

STANDALONE=127.0.0.1:7010
TW_PORT=22121
SP_PORT=6394 # the proxy, standalone
CP_PORT=6395 # the proxy, cluster
SG_PORT=6396 # the proxy, standalone, without the event loop
CG_PORT=6397 # the proxy, cluster, without the event loop
cat >"$WORK/nutcracker.yml" <<EOF
bench:
  listen: 127.0.0.1:$TW_PORT
  hash: fnv1a_64
  distribution: ketama
  redis: true
  servers:
    - $STANDALONE:1
EOF
pids=()
nutcracker -c "$WORK/nutcracker.yml" -o "$WORK/nutcracker.log" &
pids+=($!)
SECKILL_LISTEN=127.0.0.1:$SP_PORT SECKILL_ADMIN_LISTEN= SECKILL_LOG_LEVEL=warn \
  SECKILL_REDIS_MODE=standalone SECKILL_REDIS_ADDRS=$STANDALONE \
  SECKILL_KAFKA_TOPIC=bench.pass SECKILL_KAFKA_DEAD_LETTER_TOPIC=bench.pass.dlq ./bin/seckill-proxy &
pids+=($!)
SECKILL_LISTEN=127.0.0.1:$SG_PORT SECKILL_ADMIN_LISTEN= SECKILL_LOG_LEVEL=warn SECKILL_REDIS_EVENT_LOOPS=0 \
  SECKILL_REDIS_MODE=standalone SECKILL_REDIS_ADDRS=$STANDALONE \
  SECKILL_KAFKA_TOPIC=bench.pass SECKILL_KAFKA_DEAD_LETTER_TOPIC=bench.pass.dlq ./bin/seckill-proxy &
pids+=($!)
SECKILL_LISTEN=127.0.0.1:$CG_PORT SECKILL_ADMIN_LISTEN= SECKILL_LOG_LEVEL=warn SECKILL_REDIS_EVENT_LOOPS=0 \
  SECKILL_KAFKA_TOPIC=bench.pass SECKILL_KAFKA_DEAD_LETTER_TOPIC=bench.pass.dlq ./bin/seckill-proxy &
pids+=($!)
SECKILL_LISTEN=127.0.0.1:$CP_PORT SECKILL_ADMIN_LISTEN= SECKILL_LOG_LEVEL=warn \
  SECKILL_KAFKA_TOPIC=bench.pass SECKILL_KAFKA_DEAD_LETTER_TOPIC=bench.pass.dlq ./bin/seckill-proxy &
pids+=($!)
trap 'kill "${pids[@]}" 2>/dev/null || true; wait "${pids[@]}" 2>/dev/null || true' EXIT
for port in $TW_PORT $SP_PORT $SG_PORT $CP_PORT $CG_PORT; do
  for _ in $(seq 100); do (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null && break; sleep 0.1; done
done
for pid in "${pids[@]}"; do # a port already taken by something else would be measured instead
  kill -0 "$pid" 2>/dev/null || { echo "bench-passthrough: process $pid did not start" >&2; exit 1; }
done

# rps HOST:PORT TEST PIPELINE [extra]: requests per second of one redis-benchmark test.
rps() {
  local addr=$1 test=$2 pipe=$3; shift 3
  redis-benchmark -h "${addr%:*}" -p "${addr#*:}" -c 50 -n "$N" -r 100000 -P "$pipe" -t "$test" --csv "$@" 2>/dev/null |
    awk -F'","' '/^"test"/ { header = 1; next } header { print $2 + 0; exit }'
}
median() { sort -n | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }'; }

printf '# %s, %s cores, %d requests, 50 clients, median of %d rounds\n' "$(date -u +%Y-%m-%dT%H:%MZ)" "$(nproc)" "$N" "$ROUNDS"
printf '| upstream | test | -P | seckill-proxy | twemproxy | direct | proxy/twemproxy | proxy/direct |\n|---|---|---|---|---|---|---|---|\n'
for test in get set; do
  for P in 1 16; do
    ps=() gs=() ts=() ds=()
    for ((i = 0; i < ROUNDS; i++)); do
      ps+=("$(rps 127.0.0.1:$SP_PORT $test $P)")
      gs+=("$(rps 127.0.0.1:$SG_PORT $test $P)")
      ts+=("$(rps 127.0.0.1:$TW_PORT $test $P)")
      ds+=("$(rps $STANDALONE $test $P)")
    done
    w=$(printf '%s\n' "${ts[@]}" | median) d=$(printf '%s\n' "${ds[@]}" | median)
    for row in "standalone:${ps[*]}" "standalone, event_loops=0:${gs[*]}"; do
      awk -v u="${row%%:*}" -v t="$test" -v P="$P" -v p="$(printf '%s\n' ${row#*:} | median)" -v w="$w" -v d="$d" \
        'BEGIN { printf "| %s | %s | %s | %.0f | %.0f | %.0f | %.2f | %.2f |\n", u, t, P, p, w, d, p / w, p / d }'
    done
  done
done
for test in get set; do
  for P in 1 16; do
    ps=() gs=() ds=()
    for ((i = 0; i < ROUNDS; i++)); do
      ps+=("$(rps 127.0.0.1:$CP_PORT $test $P)")
      gs+=("$(rps 127.0.0.1:$CG_PORT $test $P)")
      ds+=("$(rps 127.0.0.1:7000 $test $P --cluster)")
    done
    d=$(printf '%s\n' "${ds[@]}" | median)
    for row in "cluster:${ps[*]}" "cluster, event_loops=0:${gs[*]}"; do
      awk -v u="${row%%:*}" -v t="$test" -v P="$P" -v p="$(printf '%s\n' ${row#*:} | median)" -v d="$d" \
        'BEGIN { printf "| %s | %s | %s | %.0f | - | %.0f | - | %.2f |\n", u, t, P, p, d, p / d }'
    done
  done
done
