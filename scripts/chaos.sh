#!/usr/bin/env bash
# chaos.sh (make chaos): faults injected during real sales, then the invariants checked.
#
#   scripts/chaos.sh [runs] [fault ...]
#       runs: how many runs of each fault (default 3); faults: a subset of the list below
#       (default: all of them)
#
# Each run starts a fresh sale of 2,000 units with two proxies and two sinks (one consumer
# group), drives it with seckill-bench through both proxies, injects the fault at a random
# moment while units are still being sold, heals it, waits for the sink to drain, and runs
# seckill-bench's checks in their fault-tolerant form (-faults): I1 no oversell, I2 every
# order a buyer was told of is in MySQL, I3 no duplicate buyer, every unit sold in Redis
# reached MySQL, the outbox drained. A reply lost to the fault (an order in MySQL whose buyer
# was told nothing) is counted, not a failure.
#
# Faults:
#   proxy-kill      one proxy killed -9, restarted 1 s later
#   sink-kill       one sink killed -9, restarted 1 s later
#   kafka-stop      Kafka stopped for 5 s (scripts/devstack.sh stop kafka), then started
#   mysql-stop      MariaDB stopped for 5 s, then started
#   master-kill     the Redis master that owns the SKU killed -9; once the cluster has failed
#                   over, the node is started again and rejoins as a replica
#   operator-set    an operator's SET of the SKU's stock on Redis directly, 50 units above it
#   kafka-and-proxy Kafka stopped and a proxy killed -9 at once, both healed
#   topic-drift     one proxy restarted with another kafka.topic for 5 s, then restarted with
#                   the sale's: while drifted it must sell nothing (-DRIFT), and every order a
#                   buyer was told of must still reach MySQL
#   sink-mysql-down MariaDB stopped, both sinks killed -9 and started again while it is down
#                   (they must wait, not exit), MariaDB started 5 s later: the sinks drain
#
# Admission:
#   admission-rush  scripts/bench-admission.sh 500 50 400000 100: two proxies of their own on
#                   one sale's RATE 500 BURST 50, driven flat out; passes when they deliver at
#                   least 95% of the rate (burst aside) and no reply but an order or LIMITED
#
# Network faults, made by toxiproxy (github.com/Shopify/toxiproxy/v2, built into .stack/bin on
# first use) on the links the proxies have to Redis (one toxiproxy proxy per node) and to Kafka,
# and the sinks have to MySQL. In every run the proxies and sinks reach those services through
# toxiproxy (redis.address_map and kafka.address_map send the announced addresses there); each
# fault lasts 5 s, then toxiproxy is reset. LINK is redis, kafka or mysql:
#   LINK-cut        the link cut: toxiproxy's proxy disabled (connections dropped, new ones refused)
#   LINK-slow       200 ms added to every reply (latency toxic, downstream)
#   LINK-hang       connections accept but nothing comes back, nor goes through (timeout toxic,
#                   timeout 0, both ways)
#   LINK-stall      the service stops reading: requests pile up in the buffers until the fault
#                   heals (bandwidth toxic at rate 0, upstream)
#   LINK-reset      every connection is closed 4 KiB into its replies, most in the middle of
#                   one, with a TCP reset on the connections made during the fault (limit_data
#                   and reset_peer toxics, downstream)
#
# Clock trouble:
#   clock-off       a proxy whose clock is 5 s ahead of Redis's, then 5 s behind: the proxy's
#                   TestProxyClockOff, whose redis-server runs under datefudge (a Go program's
#                   clock cannot be faked from outside; a skewed Redis is the same skew seen
#                   from the other side). A sale window must open and end by Redis's clock.
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
ALL_FAULTS=(proxy-kill sink-kill kafka-stop mysql-stop master-kill operator-set kafka-and-proxy topic-drift sink-mysql-down)
for link in redis kafka mysql; do
  for kind in cut slow hang stall reset; do ALL_FAULTS+=("$link-$kind"); done
done
ALL_FAULTS+=(clock-off admission-rush)
FAULTS=("$@")
((${#FAULTS[@]})) || FAULTS=("${ALL_FAULTS[@]}")
BUYERS=${CHAOS_BUYERS:-4000}
CONNS=${CHAOS_CONNS:-20}
RATE=${CHAOS_RATE:-500}
WORK=$ROOT/.stack/chaos
OUT=${CHAOS_OUT:-$WORK/chaos.md}
PORTS=(6411 6412)
SINK_ADMIN_PORTS=(6421 6422)
mkdir -p "$WORK"

for f in "${FAULTS[@]}"; do
  [[ " ${ALL_FAULTS[*]} " == *" $f "* ]] || { echo "chaos: unknown fault $f (one of: ${ALL_FAULTS[*]})" >&2; exit 2; }
done

scripts/devstack.sh up >&2
eval "$(scripts/devstack.sh env)"
go build -o bin/ ./cmd/...

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
trap 'stop_all; kill "$TOXI_PID" 2>/dev/null || true; scripts/devstack.sh up >/dev/null 2>&1 || true' EXIT

# sale_key SKU NAME: the sale's key of that name (seckill-bench -print-keys, from package sale).
sale_key() { ./bin/seckill-bench -sku "$1" -print-keys | awk -v n="$2" '$1 == n { print $2 }'; }

# owner_port SKU [ASK]: the port of the master that owns SKU's slot, as the node on port ASK
# (7000) sees it.
owner_port() {
  { ./bin/seckill-bench owner -sku "$1" -ask "127.0.0.1:${2:-7000}" || true; } | cut -d: -f2
}

inject() { # inject FAULT SKU: inject the fault, heal it, return once healed
  local port pid cur ask
  case $1 in
    proxy-kill)
      kill -9 "${PIDS[proxy0]}"; wait "${PIDS[proxy0]}" 2>/dev/null || true
      sleep 1; start_proxy 0 ;;
    sink-kill)
      kill -9 "${PIDS[sink0]}"; wait "${PIDS[sink0]}" 2>/dev/null || true
      sleep 1; start_sink 0 ;;
    kafka-stop)
      scripts/devstack.sh stop kafka >&2; sleep 5; scripts/devstack.sh up >&2 ;;
    mysql-stop)
      scripts/devstack.sh stop mysql >&2; sleep 5; scripts/devstack.sh up >&2 ;;
    master-kill)
      port=$(owner_port "$2")
      pid=$(<".stack/redis/$port/redis.pid")
      log "killing the master on $port (pid $pid)"
      kill -9 "$pid"
      # It comes back only once its replica has taken over, so that it rejoins as a replica:
      # the dev stack's Redis keeps no data on disk, and a master back before the failover
      # would rejoin empty, and its replica would copy that.
      ask=7000
      [[ $port == 7000 ]] && ask=7001
      for _ in $(seq 300); do
        cur=$(owner_port "$2" "$ask" 2>/dev/null || true)
        [[ -n $cur && $cur != "$port" ]] && break
        sleep 0.1
      done
      log "the replica on ${cur:-?} took over"
      scripts/devstack.sh up >&2 ;;
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
    *-*) net_fault "${1%%-*}" "${1#*-}" ;;
  esac
}

# admission_rush_run RUN: the admission-rush fault's row, from scripts/bench-admission.sh.
admission_rush_run() {
  local rc=0 line verdict
  scripts/bench-admission.sh 500 50 400000 100 >"$DIR/admission.md" 2>"$DIR/admission.err" || rc=$?
  line=$(grep -E '^\| 500 \|' "$DIR/admission.md" || true)
  verdict=$(awk -F' *[|] *' -v rc="$rc" '{ ok = rc == 0 && $9 >= 0.95 && $10 == "none"
    printf "%s (delivered %s of RATE 500: %s orders in %s s, %s requests/s; other replies: %s)", ok ? "pass" : "**FAIL**", $9, $7, $5, $6, $10 }' <<<"$line")
  [[ -n $verdict ]] || verdict="**FAIL** (no result, rc $rc; see $DIR/admission.err)"
  echo "| admission-rush | $1 | $verdict | - | - | - | - | 0 | 0 | 0 | 0 |"
}

# clock_off_run RUN: the clock-off fault's row, from TestProxyClockOff.
clock_off_run() {
  local rc=0 got verdict
  SECKILL_REQUIRE_SERVICES=1 go test -count=1 -run 'TestProxyClockOff$' -v ./proxy >"$DIR/test.log" 2>&1 || rc=$?
  got=$(sed -n 's/.*first order \([^ ]*\) after START, ended \([^ ]*\) after END.*/\1 \/ \2/p' "$DIR/test.log" | paste -sd ';' - | sed 's/;/; behind: /')
  if ((rc == 0)); then
    verdict="pass (first order / end after Redis's START / END, proxy ahead: $got)"
  else
    verdict="**FAIL** (go test exit $rc; see $DIR/test.log)"
  fi
  echo "| clock-off | $1 | $verdict | - | - | - | - | 0 | 0 | 0 | 0 |"
}

rows=()
failed=0
for fault in "${FAULTS[@]}"; do
  runs_var=CHAOS_RUNS_${fault//-/_}
  runs_var=${runs_var^^}
  for run in $(seq "${!runs_var:-$RUNS}"); do
    id=${fault}_${run}_$(date +%s)
    DIR=$WORK/$id
    mkdir -p "$DIR"
    if [[ $fault == clock-off || $fault == admission-rush ]]; then
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
    log "$fault, run $run: sale $sku"
    ./bin/seckill-bench -addr "127.0.0.1:${PORTS[0]},127.0.0.1:${PORTS[1]}" -sku "$sku" -units 2000 \
      -buyers "$BUYERS" -conns "$CONNS" -rate "$RATE" -faults -json >"$DIR/bench.json" 2>"$DIR/bench.err" &
    bench=$!
    # A random moment while units are still being sold (they sell over about 2000/RATE s).
    delay=$(awk -v r="$RANDOM" -v span="$((2000 * 1000 / RATE))" 'BEGIN { printf "%.2f", (300 + r % (span * 6 / 10)) / 1000 }')
    sleep "$delay"
    t0=$(date +%s%N)
    inject "$fault" "$sku"
    healed=$((($(date +%s%N) - t0) / 1000000))
    rc=0
    wait "$bench" || rc=$?
    stop_all
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
done

{
  echo "# Reliability: faults during real sales"
  echo
  echo "Measured by \`scripts/chaos.sh ${ARGS[*]}\` (${#FAULTS[@]} faults, $RUNS runs each, or as CHAOS_RUNS_<FAULT> says: $(env | grep -o '^CHAOS_RUNS_[A-Z_]*=[0-9]*' | paste -sd ' ' - | sed 's/^$/none/')) on $(date -u '+%Y-%m-%d %H:%M UTC'), on a machine with"
  echo "$(nproc) cores that also runs the dev stack. Each run: a sale of 2,000 units, $BUYERS requests over"
  echo "$CONNS connections at $RATE requests per second through two proxies, two sinks in one group; the"
  echo "fault at a random moment while units sell, healed, then the drain and seckill-bench's checks under"
  echo "faults (I1 no oversell, I2 every order handed out is in MySQL, I3 no duplicate buyer, every unit"
  echo "Redis sold reached MySQL, the outbox drained). Columns: when the fault came after the load"
  echo "started; how long it lasted until healed; the error window (from the first 100 ms sample with an"
  echo "error reply to the end of the last); the drain (from the last buy until MySQL held every order);"
  echo "buyers answered \`-UNAVAILABLE\`; other errors (a connection the killed proxy dropped); orders"
  echo "in MySQL whose buyer was told nothing; orders MySQL rejected (units Redis sold that MySQL did"
  echo "not have). What each fault does is in scripts/chaos.sh."
  echo
  ./bin/seckill-bench fault-row -header
  printf '%s\n' "${rows[@]}"
} >"$OUT"
cat "$OUT"
exit "$failed"
