#!/usr/bin/env bash
# bench-tls.sh: what TLS costs, in front of the dev stack's standalone Redis: requests per
# second and the proxy's CPU per request (from /proc/<pid>/stat) for a pass-through GET and a
# successful SECKILL.BUY at -P 1 and -P 16 (redis-benchmark -c 50), for five proxies in turn:
#   plain, event loop        plaintext to Redis (port 7010) and clients, redis.event_loops 1
#   plain, goroutines        the same with redis.event_loops 0
#   TLS to Redis, loop       redis.tls to Redis's TLS port (7011), the event loop keeping its
#                            TLS connections as net.Conns (proxy/loop_conn_linux.go)
#   TLS to Redis, goroutines the same with redis.event_loops 0
#   TLS both ways            and its clients on tls_listen (redis-benchmark --tls), a goroutine
#                            each
#
#   scripts/bench-tls.sh [requests] [rounds]     (defaults: 100000, 3)
#
# Prints a Markdown table, each figure the median of the rounds.
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$ROOT"
N=${1:-100000}
ROUNDS=${2:-3}
PORT=${SECKILL_BENCH_PORT:-6398}
TLS_PORT=$((PORT + 1))

scripts/devstack.sh up >&2
eval "$(scripts/devstack.sh env)"
CERTS=${SECKILL_STACK_DIR:-$ROOT/.stack}/tls
go build -o bin/ ./cmd/seckill-proxy
SECKILL_LOG_LEVEL=warn ./bin/seckill-proxy -migrate
SKU=tlsbench_$(date +%s%N)
mariadb --no-defaults -h 127.0.0.1 -u root seckill -e "INSERT INTO seckill_items (sku, stock) VALUES ('$SKU', 100000000)"
export SECKILL_KAFKA_TOPIC=bench.tls.$SKU SECKILL_KAFKA_DEAD_LETTER_TOPIC=bench.tls.$SKU.dlq
export SECKILL_REDIS_MODE=standalone SECKILL_ADMIN_LISTEN= SECKILL_LOG_LEVEL=warn SECKILL_BUY_COMPAT_REPLIES=true
pid=
cleanup() {
  [[ -n $pid ]] && { kill "$pid" 2>/dev/null || true; wait "$pid" 2>/dev/null || true; }
  redis-cli -p 7010 --scan --pattern "*$SKU*" | xargs -r redis-cli -p 7010 del >/dev/null
  redis-cli -p 7010 srem seckill:sales "$SKU" >/dev/null
  mariadb --no-defaults -h 127.0.0.1 -u root seckill -e "DELETE FROM seckill_items WHERE sku = '$SKU'"
}
trap cleanup EXIT

HZ=$(getconf CLK_TCK)
ticks() { awk '{ print $14 + $15 }' "/proc/$pid/stat"; }
median() { sort -n | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }'; }

# run NAME CLIENT_TLS ENV...: start a proxy with ENV, measure, stop it.
run() {
  local name=$1 client_tls=$2; shift 2
  env "$@" SECKILL_LISTEN=127.0.0.1:$PORT ./bin/seckill-proxy &
  pid=$!
  local bench=(redis-benchmark -p "$PORT")
  if [[ $client_tls == 1 ]]; then bench=(redis-benchmark -p "$TLS_PORT" --tls --cacert "$CERTS/ca.pem"); fi
  for _ in $(seq 100); do redis-cli -p "$PORT" ping >/dev/null 2>&1 && break; sleep 0.1; done
  redis-cli -p "$PORT" seckill.warm "$SKU" >/dev/null
  redis-cli -p "$PORT" set tls:key hello >/dev/null
  local P what
  for P in 1 16; do
    for what in GET BUY; do
      local args=(GET tls:key) cpus=() rpss=() i t0 t1 rps
      [[ $what == BUY ]] && args=(SECKILL.BUY "$SKU" __rand_int__ 1)
      for ((i = 0; i < ROUNDS; i++)); do
        t0=$(ticks)
        rps=$("${bench[@]}" -c 50 -n "$N" -r 100000000 -P "$P" --csv "${args[@]}" 2>/dev/null | awk -F'","' 'NR == 2 { print $2 + 0 }')
        t1=$(ticks)
        cpus+=("$(awk -v d="$((t1 - t0))" -v hz="$HZ" -v N="$N" 'BEGIN { printf "%.2f", d / hz * 1e6 / N }')")
        rpss+=("$rps")
      done
      printf '| %s | %s | %s | %.1f | %.0f |\n' "$name" "$what" "$P" "$(printf '%s\n' "${cpus[@]}" | median)" "$(printf '%s\n' "${rpss[@]}" | median)"
    done
  done
  kill "$pid"
  wait "$pid" 2>/dev/null || true
  pid=
}

TLS_ENV=(SECKILL_REDIS_ADDRS=127.0.0.1:7011 SECKILL_REDIS_TLS_ENABLED=true SECKILL_REDIS_TLS_CA_FILE="$CERTS/ca.pem")
printf '| proxy | request | -P | CPU per request (µs) | requests/s |\n|---|---|---|---|---|\n'
run "plain, event loop" 0 SECKILL_REDIS_ADDRS=127.0.0.1:7010 SECKILL_REDIS_EVENT_LOOPS=1
run "plain, goroutines" 0 SECKILL_REDIS_ADDRS=127.0.0.1:7010 SECKILL_REDIS_EVENT_LOOPS=0
run "TLS to Redis, loop" 0 "${TLS_ENV[@]}" SECKILL_REDIS_EVENT_LOOPS=1
run "TLS to Redis, goroutines" 0 "${TLS_ENV[@]}" SECKILL_REDIS_EVENT_LOOPS=0
run "TLS both ways" 1 "${TLS_ENV[@]}" SECKILL_TLS_LISTEN=127.0.0.1:$TLS_PORT \
  SECKILL_TLS_CERT_FILE="$CERTS/server.pem" SECKILL_TLS_KEY_FILE="$CERTS/server.key"
