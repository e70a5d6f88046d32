#!/usr/bin/env bash
# chaos.sh (make chaos): faults injected during real sales, then the invariants checked.
#
#   scripts/chaos.sh [runs] [fault ...]
#       runs: how many runs of each fault (default 3); faults: a subset of those that
#       `seckill-bench fault-plan -list` lists (default: all of them)
#
# Each run starts a fresh sale of 2,000 units with two proxies and two sinks (one consumer
# group), drives it with seckill-bench through both proxies, injects the fault at a random
# moment while units are still being sold, heals it, waits for the sink to drain, and runs
# seckill-bench's checks in their fault-tolerant form (-faults): I1 no oversell, I2 every
# order a buyer was told of is in MySQL, I3 no duplicate buyer, every unit sold in Redis
# reached MySQL, the outbox drained. A reply lost to the fault (an order in MySQL whose buyer
# was told nothing) is counted, not a failure.
#
# The faults, and what each does, are internal/chaos's catalogue: `seckill-bench fault-plan
# -list`. This script only starts and stops what they need: processes (the proxies, the sinks,
# a Redis master, Kafka, MariaDB), toxiproxy's faults on the links to Redis, Kafka and MySQL
# (`seckill-bench toxi`, toxiproxy's Go client, built into .stack/bin on first use; in every
# run the proxies and sinks reach those services through toxiproxy), the clock test
# (TestProxyClockOff) and the admission bench (scripts/bench-admission.sh). The plan, the
# moment of each fault and every row of the table come from seckill-bench (fault-plan,
# fault-row, fault-intro).
#
# Settings (environment): CHAOS_RUNS_<FAULT> (the runs of one fault, its name in capitals with
# _ for -, e.g. CHAOS_RUNS_MASTER_KILL=10; default: runs), CHAOS_BUYERS (4000), CHAOS_CONNS (20), CHAOS_RATE (requests per
# second, 500: the units sell over about four seconds), CHAOS_LOG_LEVEL (the proxies' and
# sinks' log level, warn), CHAOS_OUT (the Markdown table,
# default .stack/chaos/chaos.md). Logs of every run are under .stack/chaos/<run>/.
# Exits 1 if any run fails a check.
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$ROOT"
ARGS=("$@")
RUNS=${1:-3}
shift || true
BUYERS=${CHAOS_BUYERS:-4000}
CONNS=${CHAOS_CONNS:-20}
RATE=${CHAOS_RATE:-500}
WORK=$ROOT/.stack/chaos
OUT=${CHAOS_OUT:-$WORK/chaos.md}
PORTS=(6411 6412)
SINK_ADMIN_PORTS=(6421 6422)
mkdir -p "$WORK"

go build -o bin/ ./cmd/...
# PLAN: a line per fault, "NAME KIND RUNS BUCKETS CROWD" (unknown names stop the suite here):
# BUCKETS is the sale's stock buckets, CROWD how many other sales are open beside it.
PLAN=$(./bin/seckill-bench fault-plan -runs "$RUNS" "$@")

scripts/devstack.sh up >&2
eval "$(scripts/devstack.sh env)"

log() { printf 'chaos: %s\n' "$*" >&2; }

# toxiproxy: a proxy per Redis node (port + 20000), one for Kafka and one for MySQL.
TOXIPROXY=$ROOT/.stack/bin/toxiproxy-server
TOXI=http://127.0.0.1:8474
if [[ ! -x $TOXIPROXY ]]; then
  log "building toxiproxy-server v2.5.0"
  gobin=$(mktemp -d)
  GOBIN=$gobin go install github.com/Shopify/toxiproxy/v2/cmd/server@v2.5.0
  mkdir -p "$(dirname "$TOXIPROXY")"
  mv "$gobin/server" "$TOXIPROXY"
  rm -rf "$gobin"
fi
pkill -f "^$TOXIPROXY" 2>/dev/null || true # one a run that was killed left behind
LOG_LEVEL=info "$TOXIPROXY" -host 127.0.0.1 -port 8474 >"$WORK/toxiproxy.log" 2>&1 &
TOXI_PID=$!
trap 'kill "$TOXI_PID" 2>/dev/null || true' EXIT
for _ in $(seq 100); do curl -fsS "$TOXI/version" >/dev/null 2>&1 && break; sleep 0.1; done
# toxi ...: toxiproxy, through its Go client (seckill-bench toxi; the faults are internal/chaos's).
toxi() { TOXIPROXY_URL=${TOXI#http://} ./bin/seckill-bench toxi "$@"; }
REDIS_PROXIES=() REDIS_VIA=() REDIS_MAP=()
for addr in ${SECKILL_REDIS_ADDRS//,/ }; do
  port=${addr##*:}
  toxi create "redis$port" "127.0.0.1:$((port + 20000))" "$addr"
  REDIS_PROXIES+=("redis$port") REDIS_VIA+=("127.0.0.1:$((port + 20000))") REDIS_MAP+=("$addr=127.0.0.1:$((port + 20000))")
done
kafka=${SECKILL_KAFKA_BROKERS%%,*}
toxi create kafka 127.0.0.1:29092 "$kafka"
mysql=$(sed -E 's/.*@tcp\(([^)]*)\).*/\1/' <<<"$SECKILL_MYSQL_DSN")
toxi create mysql 127.0.0.1:23306 "$mysql"
# What the proxies and sinks are given: the services through toxiproxy.
VIA_REDIS_ADDRS=$(IFS=,; echo "${REDIS_VIA[*]}")
VIA_REDIS_MAP=$(IFS=,; echo "${REDIS_MAP[*]}")
VIA_KAFKA_MAP="$kafka=127.0.0.1:29092"
VIA_MYSQL_DSN=${SECKILL_MYSQL_DSN/"tcp($mysql)"/"tcp(127.0.0.1:23306)"}

# net_fault LINK KIND: the fault on every toxiproxy proxy of LINK for 5 s, then healed.
net_fault() {
  local proxies
  case $1 in
    redis) proxies=("${REDIS_PROXIES[@]}") ;;
    *) proxies=("$1") ;;
  esac
  toxi fault "$2" "${proxies[@]}"
  sleep 5
  toxi reset
}

declare -A PIDS
start_proxy() { # start_proxy N [TOPIC]: TOPIC instead of the run's (a drifted proxy)
  local n=$1 topic=${2:-$SECKILL_KAFKA_TOPIC}
  SECKILL_LISTEN=127.0.0.1:${PORTS[$n]} SECKILL_ADMIN_LISTEN= SECKILL_REDIS_ADDRS=$VIA_REDIS_ADDRS \
    SECKILL_REDIS_ADDRESS_MAP=$VIA_REDIS_MAP SECKILL_KAFKA_ADDRESS_MAP=$VIA_KAFKA_MAP \
    SECKILL_KAFKA_TOPIC=$topic ./bin/seckill-proxy >>"$DIR/proxy$n.log" 2>&1 &
  PIDS[proxy$n]=$!
  for _ in $(seq 100); do redis-cli -p "${PORTS[$n]}" ping >/dev/null 2>&1 && return 0; sleep 0.1; done
  log "proxy $n did not start; see $DIR/proxy$n.log"
  return 1
}
start_sink() { # start_sink N
  local n=$1
  SECKILL_SINK_ADMIN_LISTEN=127.0.0.1:${SINK_ADMIN_PORTS[$n]} SECKILL_MYSQL_DSN=$VIA_MYSQL_DSN \
    ./bin/seckill-sink >>"$DIR/sink$n.log" 2>&1 &
  PIDS[sink$n]=$!
}
# await_sinks: until both sinks are in a consumer group session that gave them partitions
# (their /readyz), so that a sale starts on a settled group even when the previous run left
# Kafka slow to answer.
await_sinks() {
  local n
  for n in 0 1; do
    for _ in $(seq 1200); do
      [[ $(curl -fsS "http://127.0.0.1:${SINK_ADMIN_PORTS[$n]}/readyz" 2>/dev/null) == "ok: "[1-9]* ]] && continue 2
      sleep 0.1
    done
    log "sink $n is not ready after 120 s; see $DIR/sink$n.log"
    return 1
  done
}
stop_all() {
  local p
  for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done
  for p in "${PIDS[@]}"; do wait "$p" 2>/dev/null || true; done
  PIDS=()
}
trap 'stop_all; kill "$TOXI_PID" 2>/dev/null || true; scripts/devstack.sh heal >/dev/null 2>&1 || true; scripts/devstack.sh up >/dev/null 2>&1 || true' EXIT

# sale_key SKU NAME: the sale's key of that name (seckill-bench -print-keys, from package sale).
sale_key() { ./bin/seckill-bench -sku "$1" -print-keys | awk -v n="$2" '$1 == n { print $2 }'; }

# owner_port SKU [ASK] [TAG]: the port of the master that owns SKU's slot (or its stock
# bucket TAG's), as the node on port ASK (7000) sees it.
owner_port() {
  { ./bin/seckill-bench owner -sku "$1" -ask "127.0.0.1:${2:-7000}" -tag "${3:-0}" || true; } | cut -d: -f2
}

# bucket_tag SKU I: the tag number of the sale's stock bucket I, from its meta.
bucket_tag() { redis-cli -c -p 7000 hget "$(sale_key "$1" meta)" buckets | cut -d, -f"$(($2 + 1))"; }

inject() { # inject FAULT SKU: inject the fault, heal it, return once healed
  local port pid cur ask tag began
  case $1 in
    proxy-kill|crowd-proxy-kill)
      kill -9 "${PIDS[proxy0]}"; wait "${PIDS[proxy0]}" 2>/dev/null || true
      sleep 1; start_proxy 0 ;;
    sink-kill|bucket-sink-kill)
      kill -9 "${PIDS[sink0]}"; wait "${PIDS[sink0]}" 2>/dev/null || true
      sleep 1; start_sink 0 ;;
    kafka-stop)
      scripts/devstack.sh stop kafka >&2; sleep 5; scripts/devstack.sh up >&2 ;;
    mysql-stop)
      scripts/devstack.sh stop mysql >&2; sleep 5; scripts/devstack.sh up >&2 ;;
    master-kill|bucket-master-kill|crowd-master-kill)
      tag=0
      [[ $1 == bucket-master-kill ]] && tag=$(bucket_tag "$2" 1)
      port=$(owner_port "$2" 7000 "$tag")
      pid=$(<".stack/redis/$port/redis.pid")
      log "killing the master on $port (pid $pid), owner of the sale's bucket with tag $tag"
      kill -9 "$pid"
      # It comes back only once its replica has taken over, so that it rejoins as a replica:
      # the dev stack's Redis keeps no data on disk, and a master back before the failover
      # would rejoin empty, and its replica would copy that.
      ask=7000
      [[ $port == 7000 ]] && ask=7001
      for _ in $(seq 300); do
        cur=$(owner_port "$2" "$ask" "$tag" 2>/dev/null || true)
        [[ -n $cur && $cur != "$port" ]] && break
        sleep 0.1
      done
      log "the replica on ${cur:-?} took over"
      scripts/devstack.sh up >&2 ;;
    master-pause)
      port=$(owner_port "$2" 7000 0)
      pid=$(<".stack/redis/$port/redis.pid")
      log "stopping the master on $port (pid $pid) past the node timeout"
      began=$SECONDS
      kill -STOP "$pid"
      ask=7000
      [[ $port == 7000 ]] && ask=7001
      for _ in $(seq 300); do
        cur=$(owner_port "$2" "$ask" 0 2>/dev/null || true)
        [[ -n $cur && $cur != "$port" ]] && break
        sleep 0.1
      done
      log "the replica on ${cur:-?} took over"
      while ((SECONDS - began < 5)); do sleep 0.1; done
      kill -CONT "$pid"
      for _ in $(seq 300); do
        redis-cli -p "$port" info replication 2>/dev/null | grep -q 'master_link_status:up' && break
        sleep 0.1
      done
      log "the node on $port resumed, and is a replica again" ;;
    master-partition)
      port=$(owner_port "$2" 7000 0)
      log "cutting the master on $port off from the other nodes"
      began=$SECONDS
      scripts/devstack.sh partition "$port" >&2
      ask=7000
      [[ $port == 7000 ]] && ask=7001
      for _ in $(seq 300); do
        cur=$(owner_port "$2" "$ask" 0 2>/dev/null || true)
        [[ -n $cur && $cur != "$port" ]] && break
        sleep 0.1
      done
      log "the replica on ${cur:-?} took over; $port says: $(redis-cli -p "$port" cluster info | grep -o 'cluster_state:[a-z]*')"
      while ((SECONDS - began < 5)); do sleep 0.1; done
      scripts/devstack.sh heal >&2
      for _ in $(seq 300); do
        redis-cli -p "$port" info replication 2>/dev/null | grep -q 'master_link_status:up' && break
        sleep 0.1
      done
      log "the node on $port is back, and is a replica again" ;;
    proxy-pause)
      kill -STOP "${PIDS[proxy0]}"; sleep 5; kill -CONT "${PIDS[proxy0]}" ;;
    overload) ;; # the load and the busy core are the run's own (see the bench's command)
    operator-set)
      cur=$(redis-cli -c -p 7000 get "$(sale_key "$2" stock)")
      redis-cli -c -p 7000 set "$(sale_key "$2" stock)" $((cur + 50)) >/dev/null
      log "stock set from $cur to $((cur + 50)) on Redis directly" ;;
    kafka-and-proxy)
      scripts/devstack.sh stop kafka >&2 &
      pid=$!
      kill -9 "${PIDS[proxy0]}"; wait "${PIDS[proxy0]}" 2>/dev/null || true
      sleep 1; start_proxy 0
      wait "$pid"
      sleep 4; scripts/devstack.sh up >&2 ;;
    topic-drift)
      kill "${PIDS[proxy0]}"; wait "${PIDS[proxy0]}" 2>/dev/null || true
      start_proxy 0 "$SECKILL_KAFKA_TOPIC.drifted"
      log "proxy 0 on topic $SECKILL_KAFKA_TOPIC.drifted"
      sleep 5
      kill "${PIDS[proxy0]}"; wait "${PIDS[proxy0]}" 2>/dev/null || true
      start_proxy 0 ;;
    sink-mysql-down)
      scripts/devstack.sh stop mysql >&2
      kill -9 "${PIDS[sink0]}" "${PIDS[sink1]}"
      wait "${PIDS[sink0]}" "${PIDS[sink1]}" 2>/dev/null || true
      start_sink 0; start_sink 1
      sleep 5
      for n in 0 1; do
        kill -0 "${PIDS[sink$n]}" 2>/dev/null || log "sink $n exited while MySQL was down; see $DIR/sink$n.log"
      done
      log "sink 0 /readyz while MySQL is down: $(curl -sS "http://127.0.0.1:${SINK_ADMIN_PORTS[0]}/readyz" 2>&1 | head -c 200)"
      scripts/devstack.sh up >&2 ;;
  esac
}

# admission_rush_run RUN: the admission-rush fault's row, from scripts/bench-admission.sh.
admission_rush_run() {
  local rc=0
  rm -f .stack/bench-admission/report-*.json
  ADMISSION_SPLIT=1 scripts/bench-admission.sh 500 50 400000 100 >"$DIR/admission.md" 2>"$DIR/admission.err" || rc=$?
  ./bin/seckill-bench fault-row -fault admission-rush -run "$1" -rc "$rc" -report .stack/bench-admission/report-0.json,.stack/bench-admission/report-1.json -rate 500 -burst 50
}

# clock_off_run RUN: the clock-off fault's row, from TestProxyClockOff.
clock_off_run() {
  local rc=0
  SECKILL_REQUIRE_SERVICES=1 go test -count=1 -run 'TestProxyClockOff$' -v ./proxy >"$DIR/test.log" 2>&1 || rc=$?
  ./bin/seckill-bench fault-row -fault clock-off -run "$1" -rc "$rc" -stderr "$DIR/test.log"
}

rows=()
failed=0
faults=0
# warm_crowd N: N sales of this run's own (crowd_<run>_<i>, 100 units each) warmed through
# proxy 0 in one pipeline and left idle, so that the fault strikes one sale among many.
warm_crowd() {
  local n=$1
  seq 0 $((n - 1)) | awk -v r="$id" '{ printf "INSERT INTO seckill_items (sku, stock) VALUES (\"crowd_%s_%d\", 100);\n", r, $1 }' |
    mariadb --no-defaults -h 127.0.0.1 -u root seckill
  seq 0 $((n - 1)) | awk -v r="$id" '{ s = "crowd_" r "_" $1; printf "*2\r\n$12\r\nSECKILL.WARM\r\n$%d\r\n%s\r\n", length(s), s }' |
    redis-cli -p "${PORTS[0]}" --pipe >"$DIR/crowd-warm.log" 2>&1
  log "$n other sales open: $(tail -1 "$DIR/crowd-warm.log")"
}
# drop_crowd: the crowd's keys, its place in the set of sales and its MySQL rows.
drop_crowd() { scripts/devstack.sh drop-sales "crowd_${id}_"; }

while read -r fault kind runs buckets crowd <&3; do
  faults=$((faults + 1))
  for ((run = 1; run <= runs; run++)); do
    id=${fault}_${run}_$(date +%s)
    DIR=$WORK/$id
    mkdir -p "$DIR"
    if [[ $kind == own ]]; then
      row=$("${fault//-/_}_run" "$run")
      echo "$row" >&2
      rows+=("$row")
      [[ $row == *FAIL* ]] && failed=1
      continue
    fi
    sku=chaos_${fault//-/_}_${run}_$(date +%s%N)
    export SECKILL_KAFKA_TOPIC=chaos.$id SECKILL_KAFKA_DEAD_LETTER_TOPIC=chaos.$id.dlq SECKILL_KAFKA_GROUP=chaos-$id
    export SECKILL_LOG_LEVEL=${CHAOS_LOG_LEVEL:-warn}
    start_proxy 0 && start_proxy 1
    start_sink 0; start_sink 1
    await_sinks || true
    if ((crowd > 0)); then warm_crowd "$crowd"; fi
    log "$fault, run $run: sale $sku"
    load=(-buyers "$BUYERS" -conns "$CONNS" -rate "$RATE")
    case $fault in
      operator-set) load+=(-rejected-ok) ;;
      overload) # flat out on a busy machine from the start: no fault, so no UNAVAILABLE
        load=(-buyers 20000 -conns 200 -rate 0 -no-unavailable)
        sh -c 'while :; do :; done' &
        PIDS[hog]=$! ;; # stop_all ends it with the proxies and sinks
    esac
    ./bin/seckill-bench -addr "127.0.0.1:${PORTS[0]},127.0.0.1:${PORTS[1]}" -sku "$sku" -units 2000 -buckets "$buckets" \
      "${load[@]}" -wait-outcome 30s -faults -json >"$DIR/bench.json" 2>"$DIR/bench.err" &
    bench=$!
    # A random moment while units are still being sold.
    delay=$(./bin/seckill-bench fault-row -delay -units 2000 -rate "$RATE")
    sleep "$delay"
    t0=$(date +%s%N)
    if [[ $kind == network ]]; then net_fault "${fault%%-*}" "${fault#*-}"; else inject "$fault" "$sku"; fi
    healed=$((($(date +%s%N) - t0) / 1000000))
    rc=0
    wait "$bench" || rc=$?
    stop_all
    if ((crowd > 0)); then drop_crowd; fi
    row=$(./bin/seckill-bench fault-row -report "$DIR/bench.json" -stderr "$DIR/bench.err" -fault "$fault" -run "$run" \
      -injected "$delay" -lasted "$healed" -rc "$rc")
    echo "$row" >&2
    if [[ $row == *FAIL* ]]; then
      log "seckill-bench's last words ($DIR/bench.err):"
      tail -n 5 "$DIR/bench.err" >&2
    fi
    rows+=("$row")
    [[ $row == *FAIL* ]] && failed=1
  done
done 3<<<"$PLAN"

{
  ./bin/seckill-bench fault-intro -command "scripts/chaos.sh ${ARGS[*]}" -faults "$faults" -runs "$RUNS" \
    -buyers "$BUYERS" -conns "$CONNS" -rate "$RATE"
  printf '%s\n' "${rows[@]}"
} >"$OUT"
cat "$OUT"
exit "$failed"
