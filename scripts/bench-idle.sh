#!/usr/bin/env bash
# bench-idle.sh: what open sales cost when nobody buys. SALES sales are warmed through one
# proxy (in one pipeline, timed), PROXIES proxies then sit idle in front of the cluster, and
# for SECONDS the commands every Redis master processes (INFO commandstats: a script's own
# calls count, each), each proxy's CPU time (/proc/<pid>/stat) and memory (VmRSS) are
# counted.
#
#   scripts/bench-idle.sh [sales] [proxies] [seconds]      (defaults: 1000 1 60)
#   scripts/bench-idle.sh all                              make bench's table (q)
#
# The window starts 35 s after the last proxy, past its start and the late-order watch's first
# pass (a full one); it takes in two of the sweeper's full sweeps (every 30 s), not the late
# watch's (every 5 minutes: 3 calls a sale).
#
# Prints one Markdown row: the sales in the set of sales (the run's, and any others left open
# on the cluster), proxies, the warm's time, Redis commands/s in all and per open sale, the
# proxies' mean and highest CPU (% of a core), their mean memory, and the three commands
# most sent; and appends the row to $WORK/idle.tsv. The sales, their keys and their MySQL
# rows are deleted at the end. `all` runs 10, 1,000 and 10,000 sales with 1, 4 and 16
# proxies and writes $WORK/idle.md: the rows, and the fit of commands/s = a x proxies + b x
# sales, extrapolated to 10,000 sales and 300 sidecars.
#
# IDLE_SALE=1 (which `all` sets for its rows of one proxy): after the window, the seeds' sale
# (2,000 units, 80,000 buyers, 200 connections) through the first proxy, among the open
# sales; its requests/s is the row's last column.
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$ROOT"
WORK=${BENCH_WORK:-$ROOT/.stack/bench}
mkdir -p "$WORK"
if [[ ${1:-} == all ]]; then
  : >"$WORK/idle.tsv"
  for sales in 10 1000 10000; do
    for proxies in 1 4 16; do
      IDLE_SALE=$((proxies == 1)) "$0" "$sales" "$proxies" 60 >/dev/null
    done
  done
  {
    echo "| open sales | proxies | warm (s) | Redis commands/s | per sale per second | proxy CPU mean (% of a core) | highest | proxy memory (MB) | commands most sent (/s) | the seeds' sale among them (requests/s) |"
    echo "|---|---|---|---|---|---|---|---|---|---|"
    cat "$WORK/idle.tsv"
    echo
    # The per-proxy term from the rows of the fewest sales (1 against 16 proxies), the per-sale
    # term from the rows of 1 proxy (the fewest sales against the most).
    awk -F'|' '{ s = $2 + 0; p = $3 + 0; c[s, p] = $5 + 0; m[s, p] = $9 + 0; if (p == 1) t[s] = $11 + 0; if (!(s in seen)) { seen[s] = 1; ss[n++] = s } }
      END {
        lo = ss[0]; hi = ss[n - 1]
        a = (c[lo, 16] - c[lo, 1]) / 15; b = (c[hi, 1] - c[lo, 1]) / (hi - lo)
        printf "Fit: Redis commands/s = %.1f x proxies + %.3f x open sales (from the rows of %d and %d sales). At 10,000 open sales and 300 sidecars: %.0f commands/s. Memory: %.2f KB per open sale on the proxy that warmed them (%d against %d sales, 1 proxy, RSS).\n",
          a, b, lo, hi, a * 300 + b * 10000, (m[hi, 1] - m[lo, 1]) * 1024 / (hi - lo), hi, lo
        if (t[hi] > 0 && t[lo] > 0) printf "\nThe seeds\047 sale among %d open sales: %.0f requests/s, %.2f of its %.0f among %d (goal: at least 0.9).\n", hi, t[hi], t[hi] / t[lo], t[lo], lo
      }' "$WORK/idle.tsv"
  } >"$WORK/idle.md"
  cat "$WORK/idle.md"
  exit 0
fi
SALES=${1:-1000}
PROXIES=${2:-1}
SECS=${3:-60}
scripts/devstack.sh up >&2
eval "$(scripts/devstack.sh env)"
go build -o bin/ ./cmd/seckill-proxy ./cmd/seckill-bench
# The schema first: on a new stack no proxy has run its migrations yet.
SECKILL_LOG_LEVEL=warn ./bin/seckill-proxy -migrate
run=idle$(date +%s%N)
export SECKILL_KAFKA_TOPIC=bench.$run SECKILL_KAFKA_DEAD_LETTER_TOPIC=bench.$run.dlq
BASE=6500
pids=()
cleanup() {
  kill "${pids[@]}" 2>/dev/null || true
  wait "${pids[@]}" 2>/dev/null || true
  scripts/devstack.sh drop-sales "${run}_"
}
# masters: the cluster's masters that answer, host:port each.
masters() { redis-cli -p 7000 cluster nodes | awk '$3 ~ /master/ && $3 !~ /fail/ { sub(/@.*/, "", $2); print $2 }'; }
trap cleanup EXIT

start_proxy() { # start_proxy N
  SECKILL_LISTEN=127.0.0.1:$((BASE + $1)) SECKILL_ADMIN_LISTEN= SECKILL_LOG_LEVEL=warn \
    ./bin/seckill-proxy >"$WORK/idle-proxy-$1.log" 2>&1 &
  pids+=($!)
  for _ in $(seq 100); do redis-cli -p $((BASE + $1)) ping >/dev/null 2>&1 && return 0; sleep 0.1; done
  echo "proxy $1 did not start; see $WORK/idle-proxy-$1.log" >&2
  return 1
}

seq 0 $((SALES - 1)) | awk -v r="$run" '{ printf "INSERT INTO seckill_items (sku, stock) VALUES (\"%s_%d\", 1000);\n", r, $1 }' |
  mariadb --no-defaults -h 127.0.0.1 -u root seckill
start_proxy 0
t0=$(date +%s%N)
seq 0 $((SALES - 1)) | awk -v r="$run" '{ s = r "_" $1; printf "*2\r\n$12\r\nSECKILL.WARM\r\n$%d\r\n%s\r\n", length(s), s }' |
  redis-cli -p "$BASE" --pipe >"$WORK/idle-warm.log" 2>&1
warm_ms=$((($(date +%s%N) - t0) / 1000000))
grep -q "errors: 0," "$WORK/idle-warm.log" || { echo "the warm failed: $(tail -2 "$WORK/idle-warm.log")" >&2; exit 1; }
for ((n = 1; n < PROXIES; n++)); do start_proxy "$n"; done
sleep 35 # past the proxies' start and the late watch's first (full) pass: not idle cost

# snapshot: every master's commandstats ("command calls" lines), then "cpu PID TICKS" and
# "rss PID KB" per proxy.
snapshot() {
  local addr p
  for addr in $(masters); do
    redis-cli -h "${addr%:*}" -p "${addr#*:}" info commandstats | tr -d '\r' |
      sed -n 's/^cmdstat_\([^:]*\):calls=\([0-9]*\),.*/\1 \2/p'
  done
  for p in "${pids[@]}"; do
    echo "cpu $p $(awk '{ print $14 + $15 }' "/proc/$p/stat")"
    echo "rss $p $(awk '/^VmRSS/ { print $2 }' "/proc/$p/status")"
  done
}
in_set=$(redis-cli -c -p 7000 scard seckill:sales) # the run's, and any other left open
snapshot >"$WORK/idle-before.txt"
sleep "$SECS"
snapshot >"$WORK/idle-after.txt"
hz=$(getconf CLK_TCK)
sale_rps=-
if [[ ${IDLE_SALE:-0} == 1 ]]; then
  ./bin/seckill-bench -addr "127.0.0.1:$BASE" -sku "${run}_seeds" -units 2000 -buyers 80000 -conns 200 -check=false -json \
    >"$WORK/idle-sale.json" 2>"$WORK/idle-sale.err" || { cat "$WORK/idle-sale.err" >&2; exit 1; }
  sale_rps=$(sed -n 's/.*"throughput_rps": *\([0-9.]*\).*/\1/p' "$WORK/idle-sale.json" | head -1 | cut -d. -f1)
fi
awk -v secs="$SECS" -v sale="$sale_rps" -v hz="$hz" -v sales="$in_set" -v proxies="$PROXIES" -v warm="$warm_ms" '
  FNR == NR { if ($1 == "cpu") c0[$2] = $3; else if ($1 != "rss") b[$1] += $2; next }
  { if ($1 == "cpu") c1[$2] = $3; else if ($1 == "rss") rss += $3; else a[$1] += $2 }
  END {
    for (k in a) { d = a[k] - b[k]; if (d > 0) { total += d; per[k] = d } }
    n = 0
    for (p in c1) { cpu = (c1[p] - c0[p]) / hz / secs * 100; sum += cpu; if (cpu > hi) hi = cpu; n++ }
    top = ""
    for (i = 0; i < 3; i++) {
      best = ""; for (k in per) if (best == "" || per[k] > per[best]) best = k
      if (best == "") break
      top = top (top == "" ? "" : ", ") best " " sprintf("%.0f", per[best] / secs); delete per[best]
    }
    printf "| %d | %d | %.1f | %.0f | %.3f | %.2f | %.2f | %.0f | %s | %s |\n", sales, proxies, warm / 1000, total / secs,
      total / secs / sales, sum / n, hi, rss / n / 1024, top, sale
  }' "$WORK/idle-before.txt" "$WORK/idle-after.txt" | tee -a "$WORK/idle.tsv"
