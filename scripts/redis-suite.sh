#!/usr/bin/env bash
# Redis's own test suite (the Redis 7.0 source that Debian's redis-server is built from), run in
# external mode straight against a private redis-server and, side by side, through
# seckill-proxy in front of another (standalone), then in front of the dev stack's cluster
# (cluster), one unit at a time; and the share of the tests that pass directly that pass
# through the proxy too (the missing ones in .stack/redis-suite/<run>.missing).
#
#   scripts/redis-suite.sh [standalone|cluster|both]
#
# SUITE_PORT, SUITE_PROXY_PORT and SUITE_BASEPORT move its ports (below), so that a run in
# front of the cluster can go beside a standalone one, each from a checkout of its own.
#
# Needs the dev stack up (the proxy needs MySQL and Kafka; cluster mode runs the suite against
# the dev stack's cluster, FLUSHALL and all, with its pass-through user widened as below until
# the script ends: run no other test meanwhile). Installs tcl, and fetches the Redis source with
# apt-get source through a deb-src entry of its own, into .stack/redis-suite. The proxy runs
# with no users (every client is an admin, as the suite sends no AUTH), redis.admin_allow
# naming every command it refuses, and the project's pass-through user, which may not run
# FLUSHALL, CONFIG or DEBUG (the proxy will not start with one that may). The suite starts
# every unit with FLUSHALL, FUNCTION FLUSH and CONFIG SET of the unit's overrides: in this
# copy of the suite, that setup goes straight to the servers behind the proxy (SUITE_BACKENDS),
# so that a unit runs at all; a test that runs those commands itself fails through the proxy,
# and counts. So do the tests' own FLUSHALL and FLUSHDB, and the pass-through user is widened to
# the other admin commands (CONFIG, DEBUG, ...) on the private server. Before each unit, tidy
# undoes what a unit that ended early left on the servers behind. A run takes about 35 minutes
# a mode; docs/PASSTHROUGH.md has the last figures and what fails, by cause.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
MODE=${1:-both}
WORK=$ROOT/.stack/redis-suite
# Ports (overridable, so that two runs go side by side from two checkouts): the private
# servers on PORT and PORT+1, the proxy on PROXY_PORT (its admin on the next), the suite's own
# servers from BASEPORT (direct) and BASEPORT+1111 (through the proxy).
PORT=${SUITE_PORT:-7020}
PROXY_PORT=${SUITE_PROXY_PORT:-6390}
BASEPORT=${SUITE_BASEPORT:-21111}
CLIENTS=${SUITE_CLIENTS:-4}
mkdir -p "$WORK"

die() { echo "redis-suite: $*" >&2; exit 1; }

command -v tclsh >/dev/null || { apt-get update -qq && apt-get install -y -qq tcl >/dev/null; }
version=$(redis-server --version | sed -n 's/.*v=\([0-9.]*\).*/\1/p')
SRC=$WORK/redis-$version
if [[ ! -d $SRC/tests ]]; then
  mkdir -p "$WORK/apt/parts"
  cat >"$WORK/apt/parts/src.sources" <<EOF
Types: deb-src
URIs: http://deb.debian.org/debian
Suites: $(. /etc/os-release && echo "$VERSION_CODENAME")
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
EOF
  apt_src=(-o Dir::Etc::SourceList=/dev/null -o Dir::Etc::SourceParts="$WORK/apt/parts"
    -o Dir::State::Lists="$WORK/apt/lists" -o Dir::Cache="$WORK/apt/cache")
  mkdir -p "$WORK/apt/lists/partial" "$WORK/apt/cache/archives/partial"
  apt-get "${apt_src[@]}" update -qq
  (cd "$WORK" && apt-get "${apt_src[@]}" source --download-only redis >/dev/null 2>&1)
  tar -xzf "$WORK"/redis_"$version".orig.tar.gz -C "$WORK"
  [[ -d $SRC/tests ]] || die "no tests/ in the Redis $version source"
  # A unit's setup (and its overrides' undoing) goes to the servers behind the proxy.
  cat >>"$SRC/tests/support/server.tcl" <<'TCL'

proc backend {args} {
    set out ""
    foreach p $::env(SUITE_BACKENDS) {
        catch {set out [exec redis-cli -p $p {*}$args]}
    }
    return $out
}
TCL
  # So do the tests' own FLUSHALL and FLUSHDB, which the proxy's pass-through user may never
  # run (the sales' keys would go): what they test is Redis's, not the proxy's.
  sed -i 's/^    \[srv \$level "client"\] {\*}\$args$/    if {[info exists ::env(SUITE_BACKENDS)] \&\& [string tolower [lindex $args 0]] in {flushall flushdb}} { return [backend {*}$args] }\n&/' "$SRC/tests/test_helper.tcl"
  sed -i -e '/^proc run_external_server_test/,/^}/{' -e 's/^\(\s*\)r flushall$/\1backend flushall/' \
    -e 's/^\(\s*\)r function flush$/\1backend function flush/' -e 's/\[r config get \$param\]/[backend config get $param]/' \
    -e 's/^\(\s*\)r config set \$param \$val$/\1backend config set $param $val/' -e '}' "$SRC/tests/support/server.tcl"
  mkdir -p "$SRC/src"
  for b in redis-server redis-cli redis-benchmark redis-check-aof redis-check-rdb; do
    [[ -e $SRC/src/$b ]] || ln -sf "$(command -v $b || echo /usr/bin/$b)" "$SRC/src/$b"
  done
fi

# server PORT: a private redis-server on PORT, configured as the dev stack's standalone one.
server() {
  local port=$1
  redis-cli -p "$port" shutdown nosave >/dev/null 2>&1 || true
  mkdir -p "$WORK/server-$port"
  redis-server --port "$port" --bind 127.0.0.1 --daemonize yes --dir "$WORK/server-$port" \
    --logfile "$WORK/server-$port/redis.log" --save '' --appendonly no --protected-mode no \
    --enable-debug-command local
  for _ in $(seq 50); do redis-cli -p "$port" ping >/dev/null 2>&1 && return; sleep 0.1; done
  die "redis-server on $port did not start"
}

# passthrough PORT: the pass-through user, with the project's rule widened to the admin
# commands the suite's tests run (CONFIG, DEBUG, SLOWLOG, ...) but for the ones the proxy must
# be refused to start at all (FLUSHALL, FLUSHDB, SWAPDB, ACL).
passthrough() {
  local rule
  mapfile -t rule < <(grep -v '^#' "$ROOT/scripts/redis-passthrough.acl")
  redis-cli -p "$1" ACL SETUSER seckill-passthrough reset on nopass "${rule[@]}" +@admin -flushall -flushdb -swapdb -acl >/dev/null
}

# settings PORT: a server's settings, a "name<TAB>value" line each, sorted.
settings() { redis-cli -p "$1" config get '*' | paste - - | LC_ALL=C sort; }

# baseline PORT...: the settings each server has before the first unit, which tidy puts back.
baseline() {
  local p
  for p in "$@"; do settings "$p" >"$WORK/settings-$p"; done
}

# tidy PORT...: what a unit that ended early left on the servers behind it, undone before the
# next unit (Redis's suite, run on its own, starts a server per unit; in external mode an
# exception ends a unit before its own clean-up). unit/type/set sets rdb-key-save-delay to
# 2^31 us and then cannot kill the BGSAVE child it made (it has no pid of the server): the
# child sleeps for 35 minutes a key, and every later unit that saves or rewrites the AOF
# waited out its 900 s bound, in the direct run and through the proxy alike. A server whose
# save or load delay is not 0 has its fork children killed (only then: a master's child may be
# a replica's full sync), a script still running is killed, and every setting that differs
# from its baseline is set back (set-max-intset-entries 0, appendonly yes, ... left by one unit
# failed the next one's encoding tests).
tidy() {
  local p delay name value
  for p in "$@"; do
    delay=$(redis-cli -p "$p" config get rdb-key-save-delay 2>/dev/null | sed -n 2p)
    delay+=$(redis-cli -p "$p" config get key-load-delay 2>/dev/null | sed -n 2p)
    if [[ -n $delay && $delay != 00 ]]; then
      redis-cli -p "$p" config set rdb-key-save-delay 0 >/dev/null 2>&1
      redis-cli -p "$p" config set key-load-delay 0 >/dev/null 2>&1
      pkill -KILL -f "^redis-(rdb-bgsave|aof-rewrite) [^ ]*:$p( |\$)" 2>/dev/null || true
      echo "redis-suite: killed the fork children of 127.0.0.1:$p (delays were $delay)" >&2
    fi
    # A script or function left running for ever (unit/functions' kill test ends early through
    # the proxy, whose PING does not answer BUSY) makes every later unit fail on BUSY.
    if [[ $(redis-cli -p "$p" ping 2>&1) == BUSY* ]]; then
      redis-cli -p "$p" function kill >/dev/null 2>&1
      redis-cli -p "$p" script kill >/dev/null 2>&1
      echo "redis-suite: killed the script running on 127.0.0.1:$p" >&2
    fi
    [[ -f $WORK/settings-$p ]] || continue
    while IFS=$'\t' read -r name value; do
      redis-cli -p "$p" config set "$name" "$value" >/dev/null 2>&1 || true
    done < <(LC_ALL=C comm -13 <(settings "$p") "$WORK/settings-$p")
  done
}

# suite NAME PORT BASEPORT BACKENDS: the suite in external mode against PORT, one unit at a time (an exception,
# such as a test that needs the server's pid, ends only its unit); the names of the tests that
# passed in NAME.ok.
suite() {
  local name=$1 port=$2 unit
  export SUITE_BACKENDS=$4
  echo "redis-suite: $name against 127.0.0.1:$port" >&2
  : >"$WORK/$name.log"
  # shellcheck disable=SC2086 # BACKENDS is a list of ports
  baseline $4
  for unit in $(cd "$SRC" && ./runtest --list-tests); do
    # shellcheck disable=SC2086 # BACKENDS is a list of ports
    tidy $4
    (cd "$SRC" && timeout 900 ./runtest --host 127.0.0.1 --port "$port" --singledb --clients 1 \
      --baseport "$3" --single "$unit" >>"$WORK/$name.log" 2>&1) || true
  done
  sed 's/\x1b\[[0-9;]*m//g' "$WORK/$name.log" | sed -n 's/^\[ok\]: \(.*\) ([0-9]* ms)$/\1/p' | sort -u >"$WORK/$name.ok"
  echo "redis-suite: $name: $(wc -l <"$WORK/$name.ok") tests passed" >&2
}

pids=()
# restore PORT...: the pass-through user as the dev stack makes it (the project's rule alone).
restore() {
  local port rule
  mapfile -t rule < <(grep -v '^#' "$ROOT/scripts/redis-passthrough.acl")
  for port in "$@"; do
    redis-cli -p "$port" ACL SETUSER seckill-passthrough reset on nopass "${rule[@]}" >/dev/null
  done
}
widened=()
cleanup() {
  kill "${pids[@]}" 2>/dev/null
  # The units still running (the suite's own processes, in no process group of the script's).
  pkill -f -- "--port ($PORT|$PROXY_PORT) " 2>/dev/null
  redis-cli -p "$PORT" shutdown nosave >/dev/null 2>&1
  redis-cli -p $((PORT + 1)) shutdown nosave >/dev/null 2>&1
  if ((${#widened[@]} > 0)); then
    tidy "${widened[@]}"
    restore "${widened[@]}"
    echo "redis-suite: the suite's tests may have left other settings on the cluster's nodes; scripts/devstack.sh down and up start it afresh" >&2
  fi
  true
}
trap cleanup EXIT

# proxy MODE ADDRS: a proxy in front of ADDRS on PROXY_PORT.
proxy() {
  local mode=$1 addrs=$2
  eval "$(scripts/devstack.sh env)"
  SECKILL_REDIS_MODE=$mode SECKILL_REDIS_ADDRS=$addrs SECKILL_LISTEN=127.0.0.1:$PROXY_PORT \
    SECKILL_ADMIN_LISTEN=127.0.0.1:$((PROXY_PORT + 1)) SECKILL_REDIS_PASSTHROUGH_USERNAME=seckill-passthrough \
    SECKILL_REDIS_ADMIN_ALLOW=flushall,flushdb,config,debug,shutdown,replicaof,slaveof,monitor,save,bgsave,bgrewriteaof,acl,module,failover,migrate,swapdb,move,lastsave,slowlog,latency,function,script \
    "$WORK/seckill-proxy" >"$WORK/seckill-proxy-$mode.log" 2>&1 &
  pids+=($!)
  for _ in $(seq 100); do redis-cli -p "$PROXY_PORT" ping >/dev/null 2>&1 && return; sleep 0.1; done
  die "the proxy did not start; see $WORK/seckill-proxy-$mode.log"
}

# compare NAME: the share of the direct run's passes that NAME passed too.
compare() {
  local both
  both=$(comm -12 "$WORK/direct.ok" "$WORK/$1.ok" | wc -l)
  awk -v b="$both" -v d="$(wc -l <"$WORK/direct.ok")" -v m="$1" \
    'BEGIN { printf "redis-suite: %s: %d of the %d tests that pass directly pass through the proxy: %.1f%%\n", m, b, d, 100 * b / d }'
  comm -23 "$WORK/direct.ok" "$WORK/$1.ok" >"$WORK/$1.missing"
}

go build -o "$WORK/seckill-proxy" ./cmd/seckill-proxy
# The direct run and the first proxied one go side by side, each against a server of its own.
server "$PORT"
suite direct "$PORT" "$BASEPORT" "$PORT" &
pids+=($!)
direct=$!
runs=()
case $MODE in
  standalone | both)
    server $((PORT + 1))
    passthrough $((PORT + 1))
    proxy standalone "127.0.0.1:$((PORT + 1))"
    suite proxy-standalone "$PROXY_PORT" $((BASEPORT + 1111)) "$((PORT + 1))"
    kill "${pids[1]}" 2>/dev/null || true
    runs+=(proxy-standalone)
    ;;&
  cluster | both)
    eval "$(scripts/devstack.sh env)"
    # The pass-through user widened on every node of the cluster for the run, as on the
    # private server, and put back as the dev stack makes it when the script ends.
    for port in $(echo "$SECKILL_REDIS_ADDRS" | tr , ' ' | sed 's/[0-9.]*://g'); do
      passthrough "$port"
      widened+=("$port")
    done
    proxy cluster "$SECKILL_REDIS_ADDRS"
    suite proxy-cluster "$PROXY_PORT" $((BASEPORT + 1111)) "$(echo "$SECKILL_REDIS_ADDRS" | tr , ' ' | sed 's/[0-9.]*://g')"
    runs+=(proxy-cluster)
    ;;
esac
wait "$direct"
for r in "${runs[@]}"; do compare "$r"; done
