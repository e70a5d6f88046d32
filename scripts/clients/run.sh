#!/usr/bin/env bash
# run.sh: real Redis clients through seckill-proxy, each at a pinned version, installed once
# into a cache (SECKILL_CLIENTS_CACHE, default ~/.cache/seckill-proxy-clients) so that a warm
# run is quick.
#
#   scripts/clients/run.sh python <host:port> <sku> <sku>
#   scripts/clients/run.sh node   <host:port> <sku> <sku> <sku> <sku>
#   scripts/clients/run.sh java   <host:port> <sku> <sku>
#   scripts/clients/run.sh redisson <host:port> [user password]     (Redisson 3.52)
#   scripts/clients/run.sh redisson4 <host:port> [user password]    (Redisson 4.7)
#   scripts/clients/run.sh spring <host:port> [user password]
#
# The Go test proxy/clients_test.go starts a proxy, warms the sales and calls this.
set -euo pipefail
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
CACHE=${SECKILL_CLIENTS_CACHE:-$HOME/.cache/seckill-proxy-clients}
lang=$1
shift
# maven_lib DIR: the jars that $HERE/DIR/pom.xml names, fetched once into the cache; prints
# their folder.
maven_lib() {
  local dir
  dir=$CACHE/$1-$(sha1sum "$HERE/$1/pom.xml" | cut -c1-12)
  if [[ ! -d $dir/lib ]]; then
    rm -rf "$dir.tmp" && mkdir -p "$dir.tmp"
    (cd "$HERE/$1" && mvn -q -B dependency:copy-dependencies -DoutputDirectory="$dir.tmp/lib" >&2)
    rm -rf "$dir" && mv "$dir.tmp" "$dir"
  fi
  echo "$dir/lib"
}
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
  main=Check.java
  [[ $lang == redisson ]] && main=RedissonCheck.java
  lib=$(maven_lib java)
  exec java -cp "$lib/*" "$HERE/java/$main" "$@"
  ;;
redisson4)
  lib=$(maven_lib redisson4)
  exec java -cp "$lib/*" "$HERE/java/RedissonCheck.java" "$@"
  ;;
spring)
  lib=$(maven_lib spring)
  exec java -cp "$lib/*" "$HERE/spring/SpringCheck.java" "$@"
  ;;
*)
  echo "run.sh: unknown client language $lang (python, node, java, redisson, redisson4, spring)" >&2
  exit 2
  ;;
esac
