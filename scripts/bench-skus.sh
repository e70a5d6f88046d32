#!/usr/bin/env bash
# bench-skus.sh: buys spread over many SKUs against the same buys of one SKU, through one
# proxy in front of the cluster, flat out: orders per second of the proxy's CPU (user +
# system time from /proc), since an event day sells many SKUs at once and the proxy gathers a
# script call per SKU. Flat out, and again at a paced rate ($BENCH_SKUS_RATE buys a second,
# 6000 by default, for 15 s), which both loads sell at alike: flat out, Redis's work per buy
# (a script call per SKU a turn sells, against one per 64 buys of one SKU) sets the pace, and
# the proxy's CPU per order grows as each of its turns carries fewer.
#
#   scripts/bench-skus.sh [skus] [requests] [rounds]      (defaults: 1000 200000 3)
#
# Each round runs the one-SKU load, then the spread one (seckill-bench spread: request i buys
# SKU i mod skus as a new buyer; 50 connections, pipelines of 16), so that the machine's drift
# weighs on both alike. Prints a Markdown table, a row per round, and the medians of the ratios
# (spread / one; the goal is at least 0.9); writes it to $WORK/skus.md.
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$ROOT"
SKUS=${1:-1000}
N=${2:-200000}
ROUNDS=${3:-3}
RATE=${BENCH_SKUS_RATE:-6000}
PACED=$((RATE * 15))
WORK=${BENCH_WORK:-$ROOT/.stack/bench}
mkdir -p "$WORK"
scripts/devstack.sh up >&2
eval "$(scripts/devstack.sh env)"
go build -o bin/ ./cmd/seckill-proxy ./cmd/seckill-bench
run=skus$(date +%s)
export SECKILL_KAFKA_TOPIC=bench.$run SECKILL_KAFKA_DEAD_LETTER_TOPIC=bench.$run.dlq
PORT=6460
# No sink runs, so no order gets its outcome: the late-order watch is put off (1 h) so that it
# does not read the rounds' buyers while they are measured.
SECKILL_LISTEN=127.0.0.1:$PORT SECKILL_ADMIN_LISTEN= SECKILL_LOG_LEVEL=warn SECKILL_OUTBOX_LATE_AFTER=1h \
  ./bin/seckill-proxy >"$WORK/skus-proxy.log" 2>&1 &
pid=$!
cleanup() {
  kill "$pid" 2>/dev/null || true
  wait "$pid" 2>/dev/null || true
  scripts/devstack.sh drop-sales "${run}_"
}
trap cleanup EXIT
for _ in $(seq 100); do redis-cli -p "$PORT" ping >/dev/null 2>&1 && break; sleep 0.1; done
# The sales: ${run}_one_0, with stock for every round, and ${run}_m_0 .. ${run}_m_<skus-1>.
{
  echo "INSERT INTO seckill_items (sku, stock) VALUES ('${run}_one_0', $(((N + PACED) * ROUNDS * 2)));"
  seq 0 $((SKUS - 1)) | awk -v r="$run" -v s=$(((N + PACED) * ROUNDS / SKUS + 100)) '{ printf "INSERT INTO seckill_items (sku, stock) VALUES (\"%s_m_%d\", %d);\n", r, $1, s }'
} | mariadb --no-defaults -h 127.0.0.1 -u root seckill
{ echo "${run}_one_0"; seq 0 $((SKUS - 1)) | sed "s/^/${run}_m_/"; } |
  awk '{ printf "*2\r\n$12\r\nSECKILL.WARM\r\n$%d\r\n%s\r\n", length($0), $0 }' |
  redis-cli -p "$PORT" --pipe >"$WORK/skus-warm.log" 2>&1
grep -q "errors: 0," "$WORK/skus-warm.log" || { echo "the warm failed: $(tail -2 "$WORK/skus-warm.log")" >&2; exit 1; }

HZ=$(getconf CLK_TCK)
ticks() { awk '{ print $14 + $15 }' "/proc/$pid/stat"; }
# load PREFIX SKUS UIDS REQUESTS RATE: one load; prints its orders per CPU-second and its
# orders per second.
load() {
  local t0 out
  t0=$(ticks)
  out=$(./bin/seckill-bench spread -addr "127.0.0.1:$PORT" -prefix "$1" -skus "$2" -uid-prefix "$3" -requests "$4" -rate "$5")
  awk -v t=$(($(ticks) - t0)) -v hz="$HZ" -v out="$out" 'BEGIN { split(out, f, " "); printf "%.0f %.0f\n", f[1] / (t / hz), f[1] / f[3] }'
}
{
  echo "| round | one SKU, flat out: orders per CPU-second | orders/s | $SKUS SKUs, flat out: orders per CPU-second | orders/s | ratio | one SKU at $RATE/s: orders per CPU-second | $SKUS SKUs at $RATE/s | ratio |"
  echo "|---|---|---|---|---|---|---|---|---|"
  for ((r = 1; r <= ROUNDS; r++)); do
    read -r one_cpu one_rps < <(load "${run}_one_" 1 "r$r-" "$N" 0)
    read -r many_cpu many_rps < <(load "${run}_m_" "$SKUS" "r$r-" "$N" 0)
    read -r one_paced _ < <(load "${run}_one_" 1 "p$r-" "$PACED" "$RATE")
    read -r many_paced _ < <(load "${run}_m_" "$SKUS" "p$r-" "$PACED" "$RATE")
    awk -v r="$r" -v a="$one_cpu" -v b="$one_rps" -v c="$many_cpu" -v d="$many_rps" -v e="$one_paced" -v f="$many_paced" \
      'BEGIN { printf "| %d | %d | %d | %d | %d | %.2f | %d | %d | %.2f |\n", r, a, b, c, d, c / a, e, f, f / e }'
  done
} | tee "$WORK/skus.tsv"
median() { awk -F'|' -v col="$1" 'NR > 2 { print $col + 0 }' "$WORK/skus.tsv" | sort -n | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }'; }
printf '\nMedian ratio, %d SKUs against one: %s flat out, %s at %d buys a second (goal: at least 0.9).\n' "$SKUS" "$(median 7)" "$(median 10)" "$RATE" | tee -a "$WORK/skus.tsv"
cp "$WORK/skus.tsv" "$WORK/skus.md"
