#!/usr/bin/env bash
# run.sh: real Redis clients through seckill-proxy, each at a pinned version, installed once
# into a cache (SECKILL_CLIENTS_CACHE, default ~/.cache/seckill-proxy-clients) so that a warm
# run is quick.
#
#   scripts/clients/run.sh python <host:port> <sku> <sku>
#   scripts/clients/run.sh node   <host:port> <sku> <sku> <sku> <sku>
#   scripts/clients/run.sh java   <host:port> <sku> <sku>
#   scripts/clients/run.sh redisson <host:port> [user password]
#
# The Go test proxy/clients_test.go starts a proxy, warms the sales and calls this.
set -euo pipefail
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
CACHE=${SECKILL_CLIENTS_CACHE:-$HOME/.cache/seckill-proxy-clients}
lang=$1
shift
case $lang in
python)
  env=$CACHE/python-redis-8.1.0
  if [[ ! -x $env/bin/python ]]; then
    python3 -m venv "$env.tmp" >&2
    "$env.tmp/bin/pip" install -q redis==8.1.0 >&2
    rm -rf "$env" && mv "$env.tmp" "$env"
  fi
  exec "$env/bin/python" "$HERE/check.py" "$@"
  ;;
node)
  dir=$CACHE/node-$(sha1sum "$HERE/package.json" | cut -c1-12)
  if [[ ! -d $dir/node_modules/ioredis || ! -d $dir/node_modules/redis ]]; then
    rm -rf "$dir.tmp" && mkdir -p "$dir.tmp"
    cp "$HERE/package.json" "$dir.tmp/"
    (cd "$dir.tmp" && npm install --silent --no-audit --no-fund >&2)
    rm -rf "$dir" && mv "$dir.tmp" "$dir"
  fi
  cp "$HERE/check.mjs" "$dir/check.mjs"
  exec node "$dir/check.mjs" "$@"
  ;;
java | redisson)
  dir=$CACHE/java-$(sha1sum "$HERE/java/pom.xml" | cut -c1-12)
  if [[ ! -d $dir/lib ]]; then
    rm -rf "$dir.tmp" && mkdir -p "$dir.tmp"
    (cd "$HERE/java" && mvn -q -B dependency:copy-dependencies -DoutputDirectory="$dir.tmp/lib" >&2)
    rm -rf "$dir" && mv "$dir.tmp" "$dir"
  fi
  main=Check.java
  [[ $lang == redisson ]] && main=RedissonCheck.java
  exec java -cp "$dir/lib/*" "$HERE/java/$main" "$@"
  ;;
*)
  echo "run.sh: unknown client language $lang (python, node, java, redisson)" >&2
  exit 2
  ;;
esac
