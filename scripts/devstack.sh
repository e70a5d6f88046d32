#!/usr/bin/env bash
# devstack.sh: real services on loopback for seckill-proxy's development and tests.
#
#   scripts/devstack.sh up      install what is missing, start all services, wait until each answers
#   scripts/devstack.sh down    stop every process the stack started (by PID)
#   scripts/devstack.sh status  what is up, and where the logs and data are
#   scripts/devstack.sh env     the SECKILL_* addresses, as export lines for eval
#   scripts/devstack.sh stop kafka|mysql   stop one service (fault tests); `up` starts it again
#   scripts/devstack.sh partition PORT     cut the cluster node on PORT off from the other nodes
#                                          (cluster bus and replication, both ways, with iptables),
#                                          while clients on 127.0.0.1 still reach it
#   scripts/devstack.sh heal               end every partition
#   scripts/devstack.sh drop-sales PREFIX  remove every sale whose SKU starts with PREFIX (a bench's
#                                          or a fault run's own): its keys on every master, its place
#                                          in the set of sales, its MySQL item
#
# Services:
#   Redis Cluster  6 nodes of Debian's redis-server (3 masters, 3 replicas), 127.0.0.1:7000-7005
#   Redis          one plain server, 127.0.0.1:7010, for the standalone upstream mode
#                  (every Redis node has the ACL user seckill-passthrough, without a password,
#                  with the rule in scripts/redis-passthrough.acl). Each cluster node opens its
#                  own connections (cluster bus, replication) from an address of its own,
#                  127.0.0.100 + (port - 7000), and announces 127.0.0.1, so that a partition can be
#                  cut by address while clients see one address
#   MariaDB        a throwaway instance, 127.0.0.1:3306, database "seckill", root without password
#   Kafka          Apache Kafka in KRaft mode (broker+controller), 127.0.0.1:9092, from Maven Central
#   TLS            a throwaway CA and certificates for 127.0.0.1 in $STACK/tls (ca.pem, server.pem and
#                  server.key, client.pem and client.key), made once, for the transport tests:
#                  Redis's standalone server also on TLS port 7011 and each cluster node on its
#                  port + 100 (7100-7105; tls-auth-clients optional),
#                  MariaDB with TLS and a user seckill_tls (password tls-secret) that may log in
#                  over TLS only, Kafka also on a SASL_SSL listener 127.0.0.1:9094 (PLAIN,
#                  SCRAM-SHA-256 and SCRAM-SHA-512; user seckill, password seckill-secret)
#   Prometheus     Debian's prometheus, 127.0.0.1:19090, scraping every second the targets listed in
#                  $STACK/prometheus/targets/{proxy,sink}-*.json (file service discovery: a test
#                  writes its own there); make run's proxy (127.0.0.1:6381) and sink (:6382) are
#                  listed from the start
#
# Everything lives under $SECKILL_STACK_DIR (default: .stack in the repo, which git ignores).
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
STACK=${SECKILL_STACK_DIR:-$ROOT/.stack}
KAFKA_POM=$ROOT/scripts/kafka/pom.xml
KAFKA_VERSION=$(sed -n 's:.*<kafka.version>\(.*\)</kafka.version>.*:\1:p' "$KAFKA_POM")
KAFKA_LIBS=$STACK/cache/kafka-$KAFKA_VERSION
REDIS_PORTS=(7000 7001 7002 7003 7004 7005)
STANDALONE_PORT=7010
STANDALONE_TLS_PORT=7011
# Each cluster node also listens for TLS on its port + 100 (7100-7105). The cluster announces
# its plaintext ports (tls-cluster no, so the plaintext tests see the cluster they know); a TLS
# test reaches the nodes through redis.address_map, as a proxy behind a NAT would.
TLS_PORT_OFFSET=100
MYSQL_PORT=3306
KAFKA_PORT=9092
KAFKA_CONTROLLER_PORT=9093
KAFKA_SASL_SSL_PORT=9094
KAFKA_SASL_USER=seckill
KAFKA_SASL_PASSWORD=seckill-secret
MYSQL_TLS_USER=seckill_tls
MYSQL_TLS_PASSWORD=tls-secret
PROM_PORT=19090
HOST=127.0.0.1

log() { printf 'devstack: %s\n' "$*" >&2; }
die() { printf 'devstack: error: %s\n' "$*" >&2; exit 1; }

# wait_for SECONDS WHAT CMD...: run CMD until it succeeds, or fail after SECONDS.
wait_for() {
  local secs=$1 what=$2; shift 2
  local deadline=$((SECONDS + secs))
  until "$@" >/dev/null 2>&1; do
    if ((SECONDS >= deadline)); then
      die "$what did not come up within ${secs}s"
    fi
    sleep 0.2
  done
}

# alive PIDFILE NAME: the PID in PIDFILE runs and its command line names NAME.
alive() {
  local pidfile=$1 name=$2 pid
  [[ -s $pidfile ]] || return 1
  pid=$(<"$pidfile")
  [[ -r /proc/$pid/cmdline ]] || return 1
  tr '\0' ' ' <"/proc/$pid/cmdline" | grep -q -- "$name"
}

port_open() { (exec 3<>"/dev/tcp/$HOST/$1") 2>/dev/null; }

# claim_port PORT PIDFILE NAME: fail clearly if PORT is taken by a process that is not ours.
claim_port() {
  local port=$1 pidfile=$2 name=$3
  if port_open "$port" && ! alive "$pidfile" "$name"; then
    local who
    who=$(ss -ltnpH "sport = :$port" 2>/dev/null | sed -n 's/.*users:((\(.*\))).*/\1/p' | head -1)
    die "port $port is taken by something else${who:+ ($who)}; stop it or free the port"
  fi
}

install_missing() {
  local pkgs=()
  command -v redis-server >/dev/null || pkgs+=(redis-server)
  command -v redis-cli >/dev/null || pkgs+=(redis-tools)
  command -v mariadbd >/dev/null || pkgs+=(mariadb-server)
  command -v mariadb >/dev/null || pkgs+=(mariadb-client)
  command -v ss >/dev/null || pkgs+=(iproute2)
  command -v iptables >/dev/null || pkgs+=(iptables) # partitions (chaos's master-partition)
  command -v curl >/dev/null || pkgs+=(curl)
  command -v openssl >/dev/null || pkgs+=(openssl) # the TLS tests' throwaway CA
  command -v prometheus >/dev/null && command -v promtool >/dev/null || pkgs+=(prometheus) # promtool lints the /metrics endpoints; prometheus scrapes them in a test
  command -v chromium >/dev/null || pkgs+=(chromium fonts-dejavu-core) # headless, for the live sale page's test
  command -v datefudge >/dev/null || pkgs+=(datefudge) # a redis-server with its clock off, for the clock test
  if ((${#pkgs[@]})); then
    log "installing ${pkgs[*]} with apt-get (first run only)"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq >/dev/null
    apt-get install -y -qq --no-install-recommends "${pkgs[@]}" >/dev/null
  fi
  command -v java >/dev/null || die "java not found: install a JDK 17"
  if [[ ! -f $KAFKA_LIBS/.complete ]]; then
    command -v mvn >/dev/null || die "mvn not found: install Maven"
    log "fetching Apache Kafka $KAFKA_VERSION jars from Maven Central (first run only)"
    mkdir -p "$KAFKA_LIBS"
    mvn -q -B -f "$KAFKA_POM" dependency:copy-dependencies \
      -DincludeScope=runtime -DoutputDirectory="$KAFKA_LIBS" >&2
    touch "$KAFKA_LIBS/.complete"
  fi
}

# ---------- Redis Cluster ----------

redis_cli() { redis-cli -h "$HOST" -p "$1" "${@:2}"; }

# node_source PORT: the address the cluster node on PORT opens its own connections from.
node_source() { echo "127.0.0.$((100 + $1 - REDIS_PORTS[0]))"; }

redis_start() {
  local port dir
  for port in "${REDIS_PORTS[@]}" "$STANDALONE_PORT"; do
    dir=$STACK/redis/$port
    claim_port "$port" "$dir/redis.pid" redis-server
    alive "$dir/redis.pid" redis-server && continue
    mkdir -p "$dir"
    local cluster=yes own="" tls_port=$((port + TLS_PORT_OFFSET))
    if [[ $port == "$STANDALONE_PORT" ]]; then
      cluster=no
      tls_port=$STANDALONE_TLS_PORT
    else
      own="bind-source-addr $(node_source "$port")
cluster-announce-ip $HOST
replica-announce-ip $HOST"
    fi
    own="$own
tls-port $tls_port
tls-cert-file $TLS/server.pem
tls-key-file $TLS/server.key
tls-ca-cert-file $TLS/ca.pem
tls-auth-clients optional"
    cat >"$dir/redis.conf" <<EOF
bind $HOST
port $port
daemonize yes
dir $dir
pidfile $dir/redis.pid
logfile $dir/redis.log
cluster-enabled $cluster
cluster-config-file nodes.conf
cluster-node-timeout 2000
repl-diskless-sync-delay 0
repl-ping-replica-period 1
appendonly no
save ""
protected-mode no
enable-debug-command local
$own
EOF
    redis-server "$dir/redis.conf"
  done
  for port in "${REDIS_PORTS[@]}" "$STANDALONE_PORT"; do
    wait_for 20 "redis-server on $port" redis_cli "$port" ping
  done
  if ! redis_ready; then
    if [[ $(redis_cli 7000 cluster info | tr -d '\r' | sed -n 's/^cluster_known_nodes://p') == 1 ]]; then
      log "creating the Redis Cluster"
      local addrs=()
      for port in "${REDIS_PORTS[@]}"; do addrs+=("$HOST:$port"); done
      redis-cli --cluster create "${addrs[@]}" --cluster-replicas 1 --cluster-yes >"$STACK/redis/create.log" 2>&1 ||
        die "redis-cli --cluster create failed; see $STACK/redis/create.log"
    fi
    wait_for 60 "the Redis Cluster" redis_ready
  fi
}

# flat_cpu_groups turns the kernel's autogroups off (sched_autogroup_enabled, a desktop
# feature that is on here), as on a server. redis-server daemonizes into a session of its own,
# so with autogroups each node is a group weighted as one against the whole group of the tests
# and their load processes; on this 2-vCPU kernel a node that woke with work then waited up to
# 4 s for a CPU while a load ran (strace: epoll_wait with a 28 ms timeout returned after
# 1.5 s), which froze every proxy's buys and rate leases at once. Raising the nodes' groups'
# weight (nice -10) still left 0.45 s waits; with autogroups off the worst PING under the same
# load was 10 ms. Needs root; without autogroups there is nothing to do.
flat_cpu_groups() {
  local knob=/proc/sys/kernel/sched_autogroup_enabled
  [[ -w $knob && $(cat "$knob") != 0 ]] || return 0
  echo 0 >"$knob" && log "kernel autogroups off (sched_autogroup_enabled=0): each process is scheduled as on a server"
}

# redis_ready: every node says cluster_state:ok, every replica's link is up, every master
# has a replica that is online (synced: a WAIT 1 on it is answered), and CLUSTER SLOTS lists all
# six nodes. A node restarted after a failover first comes back as a master of no slots and
# only then follows the promoted one, which meanwhile has no replica; a test that began in that
# window got UNAVAILABLE for its first buy (no replica acknowledged it).
redis_ready() {
  local port repl
  for port in "${REDIS_PORTS[@]}"; do
    redis_cli "$port" cluster info | grep -q '^cluster_state:ok' || return 1
    repl=$(redis_cli "$port" info replication | tr -d '\r')
    if grep -q '^role:slave' <<<"$repl"; then
      grep -q '^master_link_status:up' <<<"$repl" || return 1
    else
      grep -q '^slave0:.*state=online' <<<"$repl" || return 1
      ! grep -q '^slave[0-9]*:.*state=\(wait_bgsave\|send_bulk\)' <<<"$repl" || return 1
      # and it acknowledges: what a buy's WAIT 1 asks
      [[ $(redis_cli "$port" wait 1 1000 | tr -d '\r') -ge 1 ]] || return 1
    fi
  done
  local slots
  slots=$(redis_cli "${REDIS_PORTS[0]}" cluster slots)
  for port in "${REDIS_PORTS[@]}"; do
    grep -qx "$port" <<<"$slots" || return 1
  done
}

# redis_acl: the pass-through user (conf's redis.passthrough_username default) on every node,
# replicas too, since ACLs are not replicated. Applying the same rule again changes nothing.
PASSTHROUGH_USER=seckill-passthrough
redis_acl() {
  local port rule
  mapfile -t rule < <(grep -v '^#' "$ROOT/scripts/redis-passthrough.acl")
  for port in "${REDIS_PORTS[@]}" "$STANDALONE_PORT"; do
    redis_cli "$port" ACL SETUSER "$PASSTHROUGH_USER" reset on nopass "${rule[@]}" | grep -qx OK ||
      die "could not create the Redis user $PASSTHROUGH_USER on port $port"
  done
}

redis_alive() {
  local port
  for port in "${REDIS_PORTS[@]}" "$STANDALONE_PORT"; do alive "$STACK/redis/$port/redis.pid" redis-server || return 1; done
}

# ---------- TLS ----------

TLS=$STACK/tls

# tls_certs makes a CA, a server certificate for 127.0.0.1 and localhost, and a client
# certificate, once (PEM; the keys unencrypted PKCS#8, as Kafka's PEM key store reads them).
tls_certs() {
  [[ -s $TLS/client.key ]] && return 0
  mkdir -p "$TLS"
  log "making a throwaway CA and certificates in $TLS"
  (
    cd "$TLS"
    openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 3650 \
      -keyout ca.key -out ca.pem -subj "/CN=seckill dev stack CA" 2>/dev/null
    local who
    for who in server client; do
      openssl req -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -keyout "$who.key" \
        -out "$who.csr" -subj "/CN=seckill dev stack $who" 2>/dev/null
      printf 'subjectAltName=IP:127.0.0.1,DNS:localhost\nextendedKeyUsage=serverAuth,clientAuth\n' >"$who.ext"
      openssl x509 -req -in "$who.csr" -CA ca.pem -CAkey ca.key -CAcreateserial -days 3650 \
        -extfile "$who.ext" -out "$who.pem" 2>/dev/null
      rm -f "$who.csr" "$who.ext"
    done
    cat server.key server.pem >server-bundle.pem
    chmod 600 ./*.key server-bundle.pem
  ) || die "could not make the certificates in $TLS"
}

# ---------- MariaDB ----------

MYSQL_DIR() { echo "$STACK/mysql"; }

mysql_start() {
  local dir; dir=$(MYSQL_DIR)
  claim_port "$MYSQL_PORT" "$dir/mysqld.pid" mariadbd
  alive "$dir/mysqld.pid" mariadbd && return 0
  mkdir -p "$dir"
  if [[ ! -d $dir/data/mysql ]]; then
    log "initialising MariaDB in $dir/data"
    mariadb-install-db --no-defaults --user=root --datadir="$dir/data" \
      --auth-root-authentication-method=normal --skip-test-db >"$dir/install.log" 2>&1 ||
      die "mariadb-install-db failed; see $dir/install.log"
  fi
  setsid mariadbd --no-defaults --user=root --datadir="$dir/data" \
    --bind-address="$HOST" --port="$MYSQL_PORT" --socket="$dir/mysqld.sock" \
    --pid-file="$dir/mysqld.pid" --log-error="$dir/mysqld.log" \
    --innodb-buffer-pool-size=512M --innodb-flush-log-at-trx-commit=2 \
    --max-connections=1000 --skip-log-bin \
    --ssl-ca="$TLS/ca.pem" --ssl-cert="$TLS/server.pem" --ssl-key="$TLS/server.key" </dev/null >/dev/null 2>&1 &
  wait_for 60 "MariaDB on $MYSQL_PORT" mysql_root -e 'select 1'
  mysql_root -e "CREATE DATABASE IF NOT EXISTS seckill;
    CREATE USER IF NOT EXISTS '$MYSQL_TLS_USER'@'%' IDENTIFIED BY '$MYSQL_TLS_PASSWORD' REQUIRE SSL;
    GRANT ALL ON seckill.* TO '$MYSQL_TLS_USER'@'%'"
}

mysql_root() { mariadb --no-defaults -h "$HOST" -P "$MYSQL_PORT" -u root "$@"; }

mysql_alive() { alive "$(MYSQL_DIR)/mysqld.pid" mariadbd; }

# ---------- Kafka ----------

KAFKA_DIR() { echo "$STACK/kafka"; }

kafka_java() {
  java -Xms256m -Xmx512m -cp "$KAFKA_LIBS/*" \
    -Dlog4j2.configurationFile="$ROOT/scripts/kafka/log4j2.properties" \
    -Dkafka.logs.dir="$(KAFKA_DIR)" "$@"
}

kafka_start() {
  local dir; dir=$(KAFKA_DIR)
  claim_port "$KAFKA_PORT" "$dir/kafka.pid" kafka.Kafka
  claim_port "$KAFKA_CONTROLLER_PORT" "$dir/kafka.pid" kafka.Kafka
  alive "$dir/kafka.pid" kafka.Kafka && return 0
  mkdir -p "$dir"
  cat >"$dir/server.properties" <<EOF
process.roles=broker,controller
node.id=1
controller.quorum.voters=1@$HOST:$KAFKA_CONTROLLER_PORT
listeners=PLAINTEXT://$HOST:$KAFKA_PORT,CONTROLLER://$HOST:$KAFKA_CONTROLLER_PORT,SASL_SSL://$HOST:$KAFKA_SASL_SSL_PORT
advertised.listeners=PLAINTEXT://$HOST:$KAFKA_PORT,SASL_SSL://$HOST:$KAFKA_SASL_SSL_PORT
controller.listener.names=CONTROLLER
inter.broker.listener.name=PLAINTEXT
listener.security.protocol.map=CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT,SASL_SSL:SASL_SSL
sasl.enabled.mechanisms=PLAIN,SCRAM-SHA-256,SCRAM-SHA-512
listener.name.sasl_ssl.plain.sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule required user_$KAFKA_SASL_USER="$KAFKA_SASL_PASSWORD";
listener.name.sasl_ssl.scram-sha-256.sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required;
listener.name.sasl_ssl.scram-sha-512.sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required;
ssl.keystore.type=PEM
ssl.keystore.location=$TLS/server-bundle.pem
ssl.truststore.type=PEM
ssl.truststore.location=$TLS/ca.pem
log.dirs=$dir/data
num.partitions=3
auto.create.topics.enable=true
offsets.topic.replication.factor=1
offsets.topic.num.partitions=3
transaction.state.log.replication.factor=1
transaction.state.log.min.isr=1
share.coordinator.state.topic.replication.factor=1
share.coordinator.state.topic.min.isr=1
group.initial.rebalance.delay.ms=0
EOF
  if [[ ! -f $dir/data/meta.properties ]]; then
    log "formatting Kafka storage in $dir/data"
    kafka_java kafka.tools.StorageTool format --ignore-formatted \
      -t "$(kafka_java kafka.tools.StorageTool random-uuid)" -c "$dir/server.properties" \
      >"$dir/format.log" 2>&1 || die "Kafka storage format failed; see $dir/format.log"
  fi
  setsid java -Xms512m -Xmx1g -XX:+UseG1GC -cp "$KAFKA_LIBS/*" \
    -Dlog4j2.configurationFile="$ROOT/scripts/kafka/log4j2.properties" \
    -Dkafka.logs.dir="$dir" kafka.Kafka "$dir/server.properties" \
    </dev/null >"$dir/stdout.log" 2>&1 &
  echo $! >"$dir/kafka.pid"
  wait_for 60 "Kafka on $KAFKA_PORT" port_open "$KAFKA_PORT"
  wait_for 60 "a Kafka metadata request" kafka_java org.apache.kafka.tools.TopicCommand \
    --bootstrap-server "$HOST:$KAFKA_PORT" --list
  local mech
  for mech in SCRAM-SHA-256 SCRAM-SHA-512; do # one credential per request
    kafka_java kafka.admin.ConfigCommand --bootstrap-server "$HOST:$KAFKA_PORT" --alter \
      --add-config "$mech=[password=$KAFKA_SASL_PASSWORD]" \
      --entity-type users --entity-name "$KAFKA_SASL_USER" >"$dir/scram.log" 2>&1 ||
      die "could not add Kafka's $mech user; see $dir/scram.log"
  done
}

kafka_alive() { alive "$(KAFKA_DIR)/kafka.pid" kafka.Kafka && port_open "$KAFKA_PORT"; }

# ---------- Prometheus ----------

PROM_DIR() { echo "$STACK/prometheus"; }

prom_start() {
  local dir; dir=$(PROM_DIR)
  claim_port "$PROM_PORT" "$dir/prometheus.pid" prometheus
  alive "$dir/prometheus.pid" prometheus && return 0
  mkdir -p "$dir/targets" "$dir/data"
  cat >"$dir/prometheus.yml" <<EOF
global:
  scrape_interval: 1s
  scrape_timeout: 1s
  evaluation_interval: 1s
scrape_configs:
  - job_name: seckill-proxy
    file_sd_configs:
      - files: ['$dir/targets/proxy-*.json']
        refresh_interval: 1s
  - job_name: seckill-sink
    file_sd_configs:
      - files: ['$dir/targets/sink-*.json']
        refresh_interval: 1s
EOF
  echo '[{"targets": ["127.0.0.1:6381"]}]' >"$dir/targets/proxy-default.json"
  echo '[{"targets": ["127.0.0.1:6382"]}]' >"$dir/targets/sink-default.json"
  setsid prometheus --config.file="$dir/prometheus.yml" --storage.tsdb.path="$dir/data" \
    --storage.tsdb.retention.time=1d --web.listen-address="$HOST:$PROM_PORT" \
    </dev/null >"$dir/prometheus.log" 2>&1 &
  echo $! >"$dir/prometheus.pid"
  wait_for 60 "Prometheus on $PROM_PORT" curl -fsS "http://$HOST:$PROM_PORT/-/ready" -o /dev/null
}

prom_alive() { alive "$(PROM_DIR)/prometheus.pid" prometheus && port_open "$PROM_PORT"; }

# ---------- commands ----------

cmd_up() {
  local t0=$SECONDS
  if redis_alive && mysql_alive && kafka_alive && prom_alive && redis_ready; then
    redis_acl
    flat_cpu_groups
    log "already up"
    return 0
  fi
  install_missing
  mkdir -p "$STACK"
  flat_cpu_groups
  tls_certs
  redis_start
  redis_acl
  mysql_start
  kafka_start
  prom_start
  log "up in $((SECONDS - t0))s; data and logs in $STACK"
}

# stop PIDFILE NAME: TERM the process, then KILL it if it lingers.
stop() {
  local pidfile=$1 name=$2 pid i
  alive "$pidfile" "$name" || { rm -f "$pidfile"; return 0; }
  pid=$(<"$pidfile")
  kill -TERM "$pid" 2>/dev/null || true
  for ((i = 0; i < 150; i++)); do
    alive "$pidfile" "$name" || break
    sleep 0.1
  done
  if alive "$pidfile" "$name"; then
    log "$name ($pid) did not stop on TERM; killing it"
    kill -KILL "$pid" 2>/dev/null || true
  fi
  rm -f "$pidfile"
}

# The topics of the tests, the benchmarks and the fault suite: their own, never a service's.
TEST_TOPICS='(test|bench|chaos)\..*'

# prune_topics deletes the tests' own topics (each partition is a directory whose files the
# broker keeps open: left behind, they pile up until Kafka runs out of file descriptors).
prune_topics() {
  kafka_alive || return 0
  local n
  n=$(kafka_java org.apache.kafka.tools.TopicCommand --bootstrap-server "$HOST:$KAFKA_PORT" --list 2>/dev/null |
    grep -cE "^$TEST_TOPICS\$" || true)
  [[ $n -gt 0 ]] || return 0
  kafka_java org.apache.kafka.tools.TopicCommand --bootstrap-server "$HOST:$KAFKA_PORT" --delete \
    --topic "$TEST_TOPICS" >/dev/null 2>&1 || log "could not delete the tests' topics"
  log "deleted $n topics of the tests (test.*, bench.*, chaos.*)"
}

cmd_down() {
  local port
  cmd_heal 2>/dev/null
  stop "$(PROM_DIR)/prometheus.pid" prometheus
  prune_topics
  stop "$(KAFKA_DIR)/kafka.pid" kafka.Kafka
  stop "$(MYSQL_DIR)/mysqld.pid" mariadbd
  for port in "${REDIS_PORTS[@]}" "$STANDALONE_PORT"; do
    stop "$STACK/redis/$port/redis.pid" redis-server
    # Redis keeps nothing across down and up: no node saves (save ""), but a replica writes
    # the RDB of its full sync to disk, which a restart would load (old sales, piling up).
    # A node restarted by up while the others run (a test's kill) keeps it, as a real one would.
    rm -f "$STACK/redis/$port/dump.rdb"
  done
  log "down (kept: MySQL's databases and Kafka's topics but the tests' own; Redis's data is gone)"
}

cmd_status() {
  local rc=0 port
  for port in "${REDIS_PORTS[@]}" "$STANDALONE_PORT"; do
    if alive "$STACK/redis/$port/redis.pid" redis-server; then
      echo "redis   $HOST:$port  up    log $STACK/redis/$port/redis.log"
    else
      echo "redis   $HOST:$port  down"; rc=1
    fi
  done
  if redis_alive; then
    if redis_ready; then echo "cluster ok (3 masters, 3 replicas)"; else echo "cluster not ready"; rc=1; fi
  fi
  if mysql_alive; then
    echo "mariadb $HOST:$MYSQL_PORT  up    log $(MYSQL_DIR)/mysqld.log data $(MYSQL_DIR)/data"
  else
    echo "mariadb $HOST:$MYSQL_PORT  down"; rc=1
  fi
  if kafka_alive; then
    echo "kafka   $HOST:$KAFKA_PORT  up    version $KAFKA_VERSION log $(KAFKA_DIR)/server.log data $(KAFKA_DIR)/data"
  else
    echo "kafka   $HOST:$KAFKA_PORT  down"; rc=1
  fi
  if prom_alive; then
    echo "prometheus $HOST:$PROM_PORT  up    log $(PROM_DIR)/prometheus.log targets $(PROM_DIR)/targets"
  else
    echo "prometheus $HOST:$PROM_PORT  down"; rc=1
  fi
  return $rc
}

# ---------- partitions ----------
# A partition is a set of DROP rules in the chain SECKILL_PARTITION, jumped to from INPUT
# (every loopback packet passes INPUT). They match the node's bus port, its source address
# and the other nodes' source addresses, so a client's connection from 127.0.0.1 (a proxy, a
# test, toxiproxy) is never cut.
PARTITION_CHAIN=SECKILL_PARTITION

cmd_partition() {
  local port=${1:-} src first last range r
  [[ " ${REDIS_PORTS[*]} " == *" $port "* ]] || die "usage: $0 partition PORT (one of ${REDIS_PORTS[*]})"
  command -v iptables >/dev/null || die "iptables is missing (apt-get install iptables)"
  iptables -N "$PARTITION_CHAIN" 2>/dev/null || true
  iptables -C INPUT -j "$PARTITION_CHAIN" 2>/dev/null || iptables -I INPUT -j "$PARTITION_CHAIN"
  src=$(node_source "$port")
  first=${REDIS_PORTS[0]} last=${REDIS_PORTS[-1]}
  range=$(node_source "$first")-$(node_source "$last")
  local rules=(
    "-p tcp --dport $((port + 10000))"                            # the other nodes' bus links to it
    "-p tcp --sport $((port + 10000))"                            # its answers on them
    "-s $src -p tcp --dport $((first + 10000)):$((last + 10000))" # its bus links to the others
    "-d $src -p tcp --sport $((first + 10000)):$((last + 10000))" # their answers
    "-m iprange --src-range $range -p tcp --dport $port"          # its replica's link to it
    "-m iprange --dst-range $range -p tcp --sport $port"          # the replication stream
    "-s $src -p tcp --dport $first:$last"                         # its own link to a master
    "-d $src -p tcp --sport $first:$last"                         # that master's stream
  )
  for r in "${rules[@]}"; do
    # shellcheck disable=SC2086 # each rule is words for iptables
    iptables -A "$PARTITION_CHAIN" $r -j DROP
  done
  log "the node on $port is cut off from the other nodes (clients still reach it); heal with: $0 heal"
}

cmd_heal() {
  if command -v iptables >/dev/null && iptables -L "$PARTITION_CHAIN" -n >/dev/null 2>&1; then
    iptables -F "$PARTITION_CHAIN"
  fi
  log "no partition"
}

cmd_drop_sales() {
  local prefix=${1:-} addr
  [[ $prefix =~ ^[A-Za-z0-9_.:-]{3,}$ ]] || die "usage: $0 drop-sales PREFIX (3 or more of A-Z a-z 0-9 _ . : -)"
  for addr in $(redis_cli "${REDIS_PORTS[0]}" cluster nodes | awk '$3 ~ /master/ && $3 !~ /fail/ { sub(/@.*/, "", $2); print $2 }'); do
    # each master's own keys, each deleted through a client that follows MOVED
    redis-cli -h "${addr%:*}" -p "${addr#*:}" --scan --pattern "seckill:{${prefix}*" | sed 's/^/DEL /' |
      redis-cli -c -p "${REDIS_PORTS[0]}" >/dev/null
  done
  redis-cli -c -p "${REDIS_PORTS[0]}" smembers seckill:sales | grep "^${prefix}" |
    xargs -r -n 500 redis-cli -c -p "${REDIS_PORTS[0]}" srem seckill:sales >/dev/null || true
  mysql_root seckill -e "DELETE FROM seckill_items WHERE sku LIKE '${prefix//_/\\_}%'"
}

cmd_env() {
  local addrs=() port
  for port in "${REDIS_PORTS[@]}"; do addrs+=("$HOST:$port"); done
  local IFS=,
  echo "export SECKILL_REDIS_ADDRS=${addrs[*]}"
  echo "export SECKILL_KAFKA_BROKERS=$HOST:$KAFKA_PORT"
  echo "export SECKILL_MYSQL_DSN='root@tcp($HOST:$MYSQL_PORT)/seckill?parseTime=true'"
}

cmd_stop_one() {
  case ${1:-} in
    kafka) stop "$(KAFKA_DIR)/kafka.pid" kafka.Kafka ;;
    mysql) stop "$(MYSQL_DIR)/mysqld.pid" mariadbd ;;
    *) echo "usage: $0 stop kafka|mysql" >&2; exit 2 ;;
  esac
}

case ${1:-} in
  up) cmd_up ;;
  stop) cmd_stop_one "${2:-}" ;;
  partition) cmd_partition "${2:-}" ;;
  heal) cmd_heal ;;
  drop-sales) cmd_drop_sales "${2:-}" ;;
  down) cmd_down ;;
  status) cmd_status ;;
  env) cmd_env ;;
  *) echo "usage: $0 up|down|status|env|stop kafka|mysql|partition PORT|heal|drop-sales PREFIX" >&2; exit 2 ;;
esac
