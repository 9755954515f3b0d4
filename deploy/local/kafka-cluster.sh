#!/usr/bin/env bash
# kafka-cluster.sh start|stop|restart|wipe|env|status [N]
#                  node-start|node-stop|node-kill|node-pause|node-resume|node-wipe|node-pid I
# — a real Apache Kafka 4.x cluster of N nodes (default STATECAST_KAFKA_NODES or 3), each a
# combined KRaft broker and controller (a controller quorum of N), for statecast's chaos run
# and for trying a stream on a replicated cluster.
#
# It uses the jars kafka.sh fetches (the same version, from Maven Central) and state of its
# own in $RUN/kafka-cluster (node-1 … node-N, each with its config, data and log): it never
# touches kafka.sh's single broker, its ports or its data, so both can run side by side.
#
# Every node listens on PLAINTEXT (STATECAST_KAFKA_BROKERS lists the N addresses) and on a
# CONTROLLER port; its ports are free ones below the kernel's ephemeral range, chosen when
# the cluster is formatted and kept across stops and restarts. Sized for 2 cores: 320 MiB
# heaps, two network and two I/O threads per node, few internal partitions. The cluster's
# defaults are what statecast's docs ask of production: replication factor N (3 at most),
# min.insync.replicas=2 (1 for a single node), no unclean leader election, the transaction
# state at the same replication factor and min ISR. A node's session with the controllers
# expires after 6 s (broker.session.timeout.ms), a follower leaves the ISR after 10 s without
# catching up (replica.lag.time.max.ms).
#
# Each node keeps its metadata log (metadata.log.dir: meta/) apart from its partitions
# (log.dirs: data/). node-wipe I loses a node's data directory: the node is killed, data/ is
# removed and formatted again with the cluster's ID (StorageTool format --ignore-formatted,
# which writes a new meta.properties there with the same node.id and a new directory.id and
# leaves the formatted metadata directory alone), and it is not started; node-start then
# starts it empty, and it fetches every partition it hosts from the leaders again. Keeping
# the metadata log matters: a controller voter of a static quorum that lost its metadata log
# could vote again in an epoch it already voted in.
#
# STATECAST_KAFKA_LISTENERS adds client listeners when the cluster is formatted: a
# space-separated list of NODE:NAME:PORT:ADVERTISED_PORT, a PLAINTEXT listener named NAME
# on node NODE's 127.0.0.1:PORT whose metadata advertises 127.0.0.1:ADVERTISED_PORT (a test
# puts a TCP proxy there: see kafka.sh). Every node must get the same names.
#
# start is idempotent: a formatted cluster starts again with its data, config and ports; it
# is formatted afresh when there is none, when N or this script changed, or when another
# process took one of its ports.
source "$(dirname "$0")/common.sh"
POM=$REPO/deploy/local/pom.xml
VERSION=$(sed -n 's:.*<kafka.version>\(.*\)</kafka.version>.*:\1:p' "$POM")
LIBS=$CACHE/kafka-$VERSION/libs
DIR=$RUN/kafka-cluster
HEAP=${STATECAST_KAFKA_HEAP:-320m}

nodes_wanted() { echo "${1:-${STATECAST_KAFKA_NODES:-3}}"; }
nodes() { cat "$DIR/nodes" 2>/dev/null || echo 0; }
ndir() { echo "$DIR/node-$1"; }
pidfile() { echo "$(ndir "$1")/kafka.pid"; }
port() { cat "$(ndir "$1")/port"; }

env_out() {
  local i addrs=()
  for i in $(seq 1 "$(nodes)"); do addrs+=("127.0.0.1:$(port "$i")"); done
  echo "export STATECAST_KAFKA_BROKERS='$(IFS=,; echo "${addrs[*]}")'"
  echo "export STATECAST_KAFKA_NODES='$(nodes)'"
}

node_running() { pid_alive "$(pidfile "$1")" && port_open 127.0.0.1 "$(port "$1")"; }

running() {
  local i n; n=$(nodes)
  [ "$n" -gt 0 ] || return 1
  for i in $(seq 1 "$n"); do node_running "$i" || return 1; done
}

script_sum() { md5sum <"${BASH_SOURCE[0]}" | cut -c1-32; }

# java_args LOGDIR sets JAVA to the java command with the nodes' settings, logging to
# LOGDIR/server.log.
java_args() {
  JAVA=(java "-Xms$HEAP" "-Xmx$HEAP" -XX:+UseG1GC -XX:MaxGCPauseMillis=20 -XX:ParallelGCThreads=1 -XX:ConcGCThreads=1 \
    -XX:CICompilerCount=2 -Djava.awt.headless=true "-Dlog4j2.configurationFile=$DIR/log4j2.properties" \
    "-Dkafka.logs.dir=$1" -cp "$LIBS/*")
}

storage() { java_args "$DIR"; "${JAVA[@]}" kafka.tools.StorageTool "$@"; }

# format writes the config of every node and formats their storage with one cluster ID.
format() {
  local n=$1 i rf isr voters="" used=" "
  rf=$((n < 3 ? n : 3)); isr=$((n < 3 ? 1 : 2))
  rm -rf "$DIR"; mkdir -p "$DIR"
  pick() { local p; p=$(free_port); while [[ $used == *" $p "* ]]; do p=$(free_port); done; used+="$p "; echo "$p"; }
  # The added listeners' ports are not bound yet: keep them out of the nodes' own.
  for l in ${STATECAST_KAFKA_LISTENERS:-}; do
    IFS=: read -r _ _ p _ <<<"$l"; used+="$p "
  done
  for i in $(seq 1 "$n"); do
    mkdir -p "$(ndir "$i")/data" "$(ndir "$i")/meta"
    pick >"$(ndir "$i")/port"; pick >"$(ndir "$i")/cport"
    voters+="${voters:+,}$i@127.0.0.1:$(cat "$(ndir "$i")/cport")"
  done
  cat >"$DIR/log4j2.properties" <<CONF
status = warn
appender.file.type = RollingFile
appender.file.name = FILE
appender.file.fileName = \${sys:kafka.logs.dir}/server.log
appender.file.filePattern = \${sys:kafka.logs.dir}/server.log.%i
appender.file.layout.type = PatternLayout
appender.file.layout.pattern = [%d] %p %m (%c)%n
appender.file.policies.type = Policies
appender.file.policies.size.type = SizeBasedTriggeringPolicy
appender.file.policies.size.size = 50MB
appender.file.strategy.type = DefaultRolloverStrategy
appender.file.strategy.max = 2
rootLogger.level = INFO
rootLogger.appenderRef.file.ref = FILE
logger.kafka.name = kafka
logger.kafka.level = INFO
CONF
  for i in $(seq 1 "$n"); do
    local d p c; d=$(ndir "$i"); p=$(cat "$d/port"); c=$(cat "$d/cport")
    cat >"$d/server.properties" <<CONF
process.roles=broker,controller
node.id=$i
controller.quorum.voters=$voters
listeners=PLAINTEXT://127.0.0.1:$p,CONTROLLER://127.0.0.1:$c
advertised.listeners=PLAINTEXT://127.0.0.1:$p
controller.listener.names=CONTROLLER
inter.broker.listener.name=PLAINTEXT
listener.security.protocol.map=PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT
metadata.log.dir=$d/meta
log.dirs=$d/data
num.partitions=1
default.replication.factor=$rf
min.insync.replicas=$isr
unclean.leader.election.enable=false
auto.create.topics.enable=false
offsets.topic.replication.factor=$rf
offsets.topic.num.partitions=3
transaction.state.log.replication.factor=$rf
transaction.state.log.min.isr=$isr
transaction.state.log.num.partitions=4
share.coordinator.state.topic.replication.factor=$rf
share.coordinator.state.topic.min.isr=$isr
share.coordinator.state.topic.num.partitions=3
group.initial.rebalance.delay.ms=0
num.network.threads=2
num.io.threads=2
num.replica.fetchers=1
background.threads=2
log.cleaner.threads=1
log.cleaner.dedupe.buffer.size=16777216
log.cleaner.backoff.ms=500
log.retention.check.interval.ms=5000
broker.session.timeout.ms=6000
broker.heartbeat.interval.ms=1000
replica.lag.time.max.ms=10000
CONF
  done
  for l in ${STATECAST_KAFKA_LISTENERS:-}; do
    local name p adv
    IFS=: read -r i name p adv <<<"$l"
    [[ $i =~ ^[0-9]+$ && $i -ge 1 && $i -le $n && $name =~ ^[A-Z][A-Z0-9_]*$ && $p =~ ^[0-9]+$ && $adv =~ ^[0-9]+$ ]] ||
      die "STATECAST_KAFKA_LISTENERS: $l is not NODE:NAME:PORT:ADVERTISED_PORT with NODE in 1..$n"
    sed -i -e "s|^listeners=.*|&,$name://127.0.0.1:$p|" \
      -e "s|^advertised.listeners=.*|&,$name://127.0.0.1:$adv|" \
      -e "s|^listener.security.protocol.map=.*|&,$name:PLAINTEXT|" "$(ndir "$i")/server.properties"
  done
  storage random-uuid >"$DIR/cluster.id"
  for i in $(seq 1 "$n"); do
    storage format -t "$(cat "$DIR/cluster.id")" -c "$(ndir "$i")/server.properties" >"$(ndir "$i")/format.log" 2>&1 ||
      { cat "$(ndir "$i")/format.log" >&2; die "node $i: storage format failed"; }
  done
  echo "$n" >"$DIR/nodes"
  script_sum >"$DIR/script.sum"
}

# resumable succeeds when the formatted cluster has n nodes and its ports are free.
resumable() {
  local n=$1 i p
  [ "$(nodes)" = "$n" ] && [ -f "$DIR/cluster.id" ] || return 1
  [ "$(cat "$DIR/script.sum" 2>/dev/null)" = "$(script_sum)" ] || { log "config written by another version of this script: formatting afresh"; return 1; }
  for i in $(seq 1 "$n"); do
    [ -f "$(ndir "$i")/meta/meta.properties" ] || return 1
    node_running "$i" && continue
    for p in $(sed -n 's|^listeners=||p' "$(ndir "$i")/server.properties" | tr ',' '\n' | sed 's|.*:||'); do
      if port_open 127.0.0.1 "$p"; then log "warning: port $p of node $i is taken by another process: formatting afresh"; return 1; fi
    done
  done
}

# launch starts node i on its storage (unless it runs) without waiting.
launch() {
  local i=$1 d; d=$(ndir "$i")
  node_running "$i" && return 0
  pid_alive "$(pidfile "$i")" && node_stop "$i"
  stat -c %s "$d/server.log" 2>/dev/null >"$d/log.from" || echo 0 >"$d/log.from"
  java_args "$d"
  nohup "${JAVA[@]}" kafka.Kafka "$d/server.properties" >>"$d/stdout.log" 2>&1 &
  echo $! >"$(pidfile "$i")"
}

# wait_node waits until node i answers and logged its start since its launch.
wait_node() {
  local i=$1 d from; d=$(ndir "$i")
  for _ in $(seq 1 240); do
    # Only the lines written since the launch count; a log rolled over since starts afresh.
    from=$(cat "$d/log.from" 2>/dev/null || echo 0)
    [ "$(stat -c %s "$d/server.log" 2>/dev/null || echo 0)" -ge "$from" ] || from=0
    if port_open 127.0.0.1 "$(port "$i")" && tail -c +$((from + 1)) "$d/server.log" 2>/dev/null | grep -q "Kafka Server started"; then
      return 0
    fi
    pid_alive "$(pidfile "$i")" || { tail -30 "$d/stdout.log" "$d/server.log" >&2 2>/dev/null; die "node $i exited"; }
    sleep 0.5
  done
  die "node $i not ready after 120s (see $d/server.log)"
}

start() {
  local n i; n=$(nodes_wanted "${1:-}")
  [[ $n =~ ^[1-9][0-9]*$ ]] || die "node count $n is not a positive number"
  [ -f "$LIBS/.complete" ] || "$REPO/deploy/local/kafka.sh" fetch
  if running && [ "$(nodes)" = "$n" ]; then env_out; return; fi
  if ! resumable "$n"; then stop; format "$n"; fi
  # All at once: a controller quorum elects a leader only when a majority runs.
  for i in $(seq 1 "$n"); do launch "$i"; done
  for i in $(seq 1 "$n"); do wait_node "$i"; done
  log "Kafka $VERSION cluster of $n nodes ready on $(env_out | sed -n "s|.*BROKERS='\(.*\)'|\1|p") (logs $DIR/node-*/server.log)"
  env_out
}

node_stop() { # SIGTERM, SIGKILL after 20 s
  local f; f=$(pidfile "$1")
  pid_alive "$f" || return 0
  kill -CONT "$(cat "$f")" 2>/dev/null || true # a paused JVM cannot handle SIGTERM
  kill "$(cat "$f")" 2>/dev/null || true
  for _ in $(seq 1 40); do pid_alive "$f" || return 0; sleep 0.5; done
  kill -9 "$(cat "$f")" 2>/dev/null || true
  for _ in $(seq 1 20); do pid_alive "$f" || return 0; sleep 0.1; done
}

node_kill() {
  local f; f=$(pidfile "$1")
  pid_alive "$f" || return 0
  kill -9 "$(cat "$f")" 2>/dev/null || true
  for _ in $(seq 1 100); do pid_alive "$f" || return 0; sleep 0.05; done
  die "node $1 (pid $(cat "$f")) did not die"
}

node_wipe() {
  local i=$1 d; d=$(ndir "$i")
  node_kill "$i"
  rm -rf "$d/data"; mkdir -p "$d/data"
  storage format -t "$(cat "$DIR/cluster.id")" -c "$d/server.properties" --ignore-formatted >"$d/format.log" 2>&1 ||
    { cat "$d/format.log" >&2; die "node $i: storage format of the wiped data directory failed"; }
  [ -f "$d/data/meta.properties" ] || { cat "$d/format.log" >&2; die "node $i: format wrote no meta.properties in $d/data"; }
  log "node $i: data directory wiped and formatted again ($(grep directory.id "$d/data/meta.properties"))"
}

stop() {
  local i
  for i in $(seq 1 "$(nodes)"); do
    (node_stop "$i") &
  done
  wait
}

node_arg() {
  [[ ${1:-} =~ ^[0-9]+$ && $1 -ge 1 && $1 -le $(nodes) ]] || die "node ${1:-(none)}: the cluster has nodes 1..$(nodes)"
}

case "${1:-start}" in
  start) start "${2:-}" ;;
  stop) stop ;;
  restart) stop; start "${2:-$(nodes)}" ;;
  wipe) stop; rm -rf "$DIR" ;;
  env) running || die "not running"; env_out ;;
  status) running && echo running || { echo stopped; exit 1; } ;;
  node-start) node_arg "${2:-}"; launch "$2"; wait_node "$2"; log "node $2 started" ;;
  node-stop) node_arg "${2:-}"; node_stop "$2" ;;
  node-kill) node_arg "${2:-}"; node_kill "$2" ;;
  node-pause) node_arg "${2:-}"; kill -STOP "$(cat "$(pidfile "$2")")" ;;
  node-resume) node_arg "${2:-}"; kill -CONT "$(cat "$(pidfile "$2")")" ;;
  node-wipe) node_arg "${2:-}"; node_wipe "$2" ;;
  node-pid) node_arg "${2:-}"; pid_alive "$(pidfile "$2")" && cat "$(pidfile "$2")" ;;
  *) die "usage: $0 start [N]|stop|restart|wipe|env|status|node-start|node-stop|node-kill|node-pause|node-resume|node-wipe|node-pid I" ;;
esac
