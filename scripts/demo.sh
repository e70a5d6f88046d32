#!/usr/bin/env bash
# demo.sh: the seeds' sale, end to end. Brings up the dev stack, starts the sink and the proxy,
# replays 2,000 units against 80,000 buyers over 200 connections with seckill-bench, prints the
# report and the invariant checks, then stops what it started.
#
#   scripts/demo.sh            (make demo)
#   KEEP=1 scripts/demo.sh     leave the proxy and the sink running for redis-cli
#   STANDALONE=1 scripts/demo.sh   the same sale on the dev stack's plain redis-server
#                                  (127.0.0.1:7010) instead of the cluster
#
# Exits non-zero if a check fails.
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$ROOT"
LOGS=$ROOT/.stack/demo
mkdir -p "$LOGS"

say() { printf '\n== %s\n' "$*"; }

say "dev stack (the first run on a fresh machine installs redis-server, mariadb-server and Kafka's jars; this takes a minute or two)"
scripts/devstack.sh up
eval "$(scripts/devstack.sh env)"
if [[ ${STANDALONE:-0} == 1 ]]; then
  export SECKILL_REDIS_MODE=standalone SECKILL_REDIS_ADDRS=127.0.0.1:7010
fi

say "building"
go build -o bin/ ./cmd/...

for port in 6380 6381; do
  if (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; then
    echo "port $port is taken (a proxy already running?); stop it first" >&2
    exit 1
  fi
done

say "starting the sink and the proxy (logs in $LOGS)"
./bin/seckill-sink >"$LOGS/sink.log" 2>&1 &
sink_pid=$!
./bin/seckill-proxy >"$LOGS/proxy.log" 2>&1 &
proxy_pid=$!
stop_all() {
  kill "$proxy_pid" "$sink_pid" 2>/dev/null || true
  wait "$proxy_pid" "$sink_pid" 2>/dev/null || true
}
if [[ ${KEEP:-0} != 1 ]]; then
  trap stop_all EXIT
fi
for _ in $(seq 100); do
  redis-cli -p 6380 ping >/dev/null 2>&1 && break
  sleep 0.1
done

say "the seeds' sale: 2,000 units, 80,000 buyers, 200 connections"
rc=0
./bin/seckill-bench -sku demo_sku -units 2000 -buyers 80000 -conns 200 -wait-outcome 30s -chart "$LOGS/chart.svg" || rc=$?
echo "chart: $LOGS/chart.svg"

if [[ ${KEEP:-0} == 1 ]]; then
  say "still running: proxy on 127.0.0.1:6380 (pid $proxy_pid), sink (pid $sink_pid)"
  echo "  redis-cli -p 6380 SECKILL.INFO demo_sku"
  echo "  redis-cli -p 6380 SECKILL.CHECK demo_sku"
  echo "  stop them with: kill $proxy_pid $sink_pid"
fi
exit $rc
