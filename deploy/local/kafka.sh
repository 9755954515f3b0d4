#!/usr/bin/env bash
# kafka.sh start|stop|env|status — a real Apache Kafka 4.x broker (KRaft, one combined
# broker/controller) for statecast.
#
# start: fetches org.apache.kafka:kafka_2.13 and its runtime dependencies from Maven Central
# with mvn (deploy/local/pom.xml) into $CACHE/kafka-<version>/libs (outside the repo, kept
# between runs), formats the storage in $RUN/kafka, starts the broker in the background on
# free ports, logs to $RUN/kafka/server.log, and waits until it answers. Idempotent.
source "$(dirname "$0")/common.sh"
POM=$REPO/deploy/local/pom.xml
VERSION=$(sed -n 's:.*<kafka.version>\(.*\)</kafka.version>.*:\1:p' "$POM")
LIBS=$CACHE/kafka-$VERSION/libs
DIR=$RUN/kafka
PIDFILE=$DIR/kafka.pid
PORTFILE=$DIR/port

env_out() { echo "export STATECAST_KAFKA_BROKERS='127.0.0.1:$(cat "$PORTFILE")'"; }

running() { pid_alive "$PIDFILE" && [ -f "$PORTFILE" ] && port_open 127.0.0.1 "$(cat "$PORTFILE")"; }

fetch() {
  [ -f "$LIBS/.complete" ] && return
  command -v mvn >/dev/null || die "mvn not found: install Maven (apt-get install maven)"
  command -v java >/dev/null || die "java not found: install a JDK 17+"
  log "fetching Kafka $VERSION from Maven Central into $LIBS"
  rm -rf "$LIBS"
  mvn -q -B -f "$POM" dependency:copy-dependencies -DoutputDirectory="$LIBS" >&2 || die "mvn failed"
  touch "$LIBS/.complete"
}

java_run() { java -Xms256m -Xmx1g -XX:+UseG1GC -Djava.awt.headless=true \
  -Dlog4j2.configurationFile="$DIR/log4j2.properties" -cp "$LIBS/*" "$@"; }

start() {
  fetch
  if running; then env_out; return; fi
  pid_alive "$PIDFILE" && kill "$(cat "$PIDFILE")" 2>/dev/null && sleep 2 || true
  rm -rf "$DIR"; mkdir -p "$DIR/data"
  local port cport; port=$(free_port); cport=$(free_port)
  while [ "$cport" = "$port" ]; do cport=$(free_port); done
  cat >"$DIR/log4j2.properties" <<CONF
status = warn
appender.file.type = File
appender.file.name = FILE
appender.file.fileName = $DIR/server.log
appender.file.layout.type = PatternLayout
appender.file.layout.pattern = [%d] %p %m (%c)%n
rootLogger.level = INFO
rootLogger.appenderRef.file.ref = FILE
logger.kafka.name = kafka
logger.kafka.level = INFO
logger.cleaner.name = kafka.log.LogCleaner
logger.cleaner.level = INFO
CONF
  cat >"$DIR/server.properties" <<CONF
process.roles=broker,controller
node.id=1
controller.quorum.voters=1@127.0.0.1:$cport
listeners=PLAINTEXT://127.0.0.1:$port,CONTROLLER://127.0.0.1:$cport
advertised.listeners=PLAINTEXT://127.0.0.1:$port
controller.listener.names=CONTROLLER
inter.broker.listener.name=PLAINTEXT
listener.security.protocol.map=PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT
log.dirs=$DIR/data
num.partitions=1
auto.create.topics.enable=false
offsets.topic.replication.factor=1
offsets.topic.num.partitions=3
transaction.state.log.replication.factor=1
transaction.state.log.min.isr=1
share.coordinator.state.topic.replication.factor=1
share.coordinator.state.topic.min.isr=1
group.initial.rebalance.delay.ms=0
log.cleaner.backoff.ms=500
log.retention.check.interval.ms=5000
CONF
  java_run kafka.tools.StorageTool format -t "$(java_run kafka.tools.StorageTool random-uuid)" \
    -c "$DIR/server.properties" >"$DIR/format.log" 2>&1 || { cat "$DIR/format.log" >&2; die "storage format failed"; }
  echo "$port" >"$PORTFILE"
  nohup java -Xms256m -Xmx1g -XX:+UseG1GC -Djava.awt.headless=true \
    -Dlog4j2.configurationFile="$DIR/log4j2.properties" -cp "$LIBS/*" \
    kafka.Kafka "$DIR/server.properties" >"$DIR/stdout.log" 2>&1 &
  echo $! >"$PIDFILE"
  for _ in $(seq 1 120); do
    if port_open 127.0.0.1 "$port" && grep -q "Kafka Server started\|\[KafkaRaftServer nodeId=1\] Kafka Server started" "$DIR/server.log" 2>/dev/null; then
      log "Kafka $VERSION ready on 127.0.0.1:$port (log $DIR/server.log)"; env_out; return
    fi
    pid_alive "$PIDFILE" || { tail -30 "$DIR/stdout.log" "$DIR/server.log" >&2 2>/dev/null; die "kafka exited"; }
    sleep 0.5
  done
  die "kafka not ready after 60s (see $DIR/server.log)"
}

stop() {
  pid_alive "$PIDFILE" || return 0
  kill "$(cat "$PIDFILE")"
  for _ in $(seq 1 40); do pid_alive "$PIDFILE" || return 0; sleep 0.5; done
  kill -9 "$(cat "$PIDFILE")" 2>/dev/null || true
}

case "${1:-start}" in
  start) start ;;
  stop) stop ;;
  env) running || die "not running"; env_out ;;
  status) running && echo running || { echo stopped; exit 1; } ;;
  fetch) fetch ;;
  *) die "usage: $0 start|stop|env|status|fetch" ;;
esac
