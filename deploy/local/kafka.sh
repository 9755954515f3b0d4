#!/usr/bin/env bash
# kafka.sh start|stop|restart|wipe|env|status — a real Apache Kafka 4.x broker (KRaft, one
# combined broker/controller) for statecast.
#
# start: fetches org.apache.kafka:kafka_2.13 and its runtime dependencies from Maven Central
# with mvn (deploy/local/pom.xml) into $CACHE/kafka-<version>/libs (outside the repo, kept
# between runs), formats the storage in $RUN/kafka, starts the broker in the background on
# free ports, logs to $RUN/kafka/server.log, and waits until it answers. Idempotent.
#
# The broker has three client listeners: PLAINTEXT (STATECAST_KAFKA_BROKERS); SASL_SSL
# (STATECAST_KAFKA_SASL_BROKERS): TLS with a certificate for 127.0.0.1 signed by a test CA
# made at start with the JDK's keytool (its PEM: STATECAST_KAFKA_SASL_CA), and SASL
# SCRAM-SHA-256, SCRAM-SHA-512 and PLAIN for the user STATECAST_KAFKA_SASL_USER with a
# random password (STATECAST_KAFKA_SASL_PASSWORD), its SCRAM credentials written by the
# broker's own storage tool (format --add-scram); and SSL with client certificates required
# (mutual TLS, STATECAST_KAFKA_MTLS_BROKERS): the same server certificate, and a client
# certificate signed by the same CA (STATECAST_KAFKA_MTLS_CA, _CERT and _KEY, PEM files).
# A broker started by an older version of this script, without those listeners, is
# restarted.
#
# A broker that was stopped (stop, or killed) starts again with its data, its config and its
# ports: clients reconnect to the same addresses and find their topics. The storage is
# formatted afresh only when there is none, when this script changed since it was written
# (its settings may differ), or when another process took one of its ports (a warning says
# so). restart = stop + start; wipe = stop and remove the data.
#
# STATECAST_KAFKA_LISTENERS adds client listeners when the storage is formatted: a
# space-separated list of NAME:PORT:ADVERTISED_PORT, each a PLAINTEXT listener on
# 127.0.0.1:PORT whose metadata advertises 127.0.0.1:ADVERTISED_PORT. A test puts a TCP
# proxy on the advertised port: a client that bootstraps through it is sent back to it by
# the metadata, so every connection of that client goes through its proxy.
source "$(dirname "$0")/common.sh"
POM=$REPO/deploy/local/pom.xml
VERSION=$(sed -n 's:.*<kafka.version>\(.*\)</kafka.version>.*:\1:p' "$POM")
LIBS=$CACHE/kafka-$VERSION/libs
DIR=$RUN/kafka
PIDFILE=$DIR/kafka.pid
PORTFILE=$DIR/port
SASLPORTFILE=$DIR/sasl.port
MTLSPORTFILE=$DIR/mtls.port
TLSDIR=$DIR/tls
SASL_USER=statecast
SASL_MECHANISM=SCRAM-SHA-512

env_out() {
  echo "export STATECAST_KAFKA_BROKERS='127.0.0.1:$(cat "$PORTFILE")'"
  echo "export STATECAST_KAFKA_SASL_BROKERS='127.0.0.1:$(cat "$SASLPORTFILE")'"
  echo "export STATECAST_KAFKA_SASL_CA='$TLSDIR/ca.pem'"
  echo "export STATECAST_KAFKA_SASL_MECHANISM='$SASL_MECHANISM'"
  echo "export STATECAST_KAFKA_SASL_USER='$SASL_USER'"
  echo "export STATECAST_KAFKA_SASL_PASSWORD='$(cat "$DIR/sasl.password")'"
  echo "export STATECAST_KAFKA_MTLS_BROKERS='127.0.0.1:$(cat "$MTLSPORTFILE")'"
  echo "export STATECAST_KAFKA_MTLS_CA='$TLSDIR/ca.pem'"
  echo "export STATECAST_KAFKA_MTLS_CERT='$TLSDIR/client.pem'"
  echo "export STATECAST_KAFKA_MTLS_KEY='$TLSDIR/client.key'"
}

running() {
  pid_alive "$PIDFILE" && [ -f "$PORTFILE" ] && port_open 127.0.0.1 "$(cat "$PORTFILE")" &&
    [ -f "$SASLPORTFILE" ] && [ -f "$DIR/sasl.password" ] && [ -f "$TLSDIR/ca.pem" ] && port_open 127.0.0.1 "$(cat "$SASLPORTFILE")" &&
    [ -f "$MTLSPORTFILE" ] && [ -f "$TLSDIR/client.key" ] && port_open 127.0.0.1 "$(cat "$MTLSPORTFILE")"
}

# make_tls writes a test CA (ca.pem), the broker's PKCS12 keystore (a key and a certificate
# for 127.0.0.1 and localhost signed by the CA; it holds the CA as trusted too, so it is the
# truststore that verifies client certificates) and a client certificate and key
# (client.pem, client.key: CN statecast-client) into $TLSDIR, with keytool and java: they
# come with the JDK that runs the broker, so nothing else is needed.
make_tls() {
  local pw=$1 kt=(keytool -noprompt -storetype PKCS12 -storepass "$1" -keypass "$1")
  command -v keytool >/dev/null || die "keytool not found: it comes with the JDK (install a JDK 17+)"
  mkdir -p "$TLSDIR"
  "${kt[@]}" -genkeypair -alias ca -keyalg EC -groupname secp256r1 -dname "CN=statecast local test CA" \
    -ext bc:c -validity 3650 -keystore "$TLSDIR/ca.p12" >/dev/null 2>&1 || die "keytool: CA"
  "${kt[@]}" -exportcert -rfc -alias ca -keystore "$TLSDIR/ca.p12" -file "$TLSDIR/ca.pem" >/dev/null 2>&1 || die "keytool: CA export"
  "${kt[@]}" -genkeypair -alias broker -keyalg EC -groupname secp256r1 -dname "CN=localhost" \
    -validity 3650 -keystore "$TLSDIR/broker.p12" >/dev/null 2>&1 || die "keytool: broker key"
  "${kt[@]}" -certreq -alias broker -keystore "$TLSDIR/broker.p12" -file "$TLSDIR/broker.csr" >/dev/null 2>&1 || die "keytool: broker request"
  "${kt[@]}" -gencert -alias ca -keystore "$TLSDIR/ca.p12" -infile "$TLSDIR/broker.csr" -outfile "$TLSDIR/broker.pem" -rfc \
    -ext SAN=ip:127.0.0.1,dns:localhost -ext EKU=serverAuth -validity 3650 >/dev/null 2>&1 || die "keytool: broker certificate"
  "${kt[@]}" -importcert -alias ca -file "$TLSDIR/ca.pem" -keystore "$TLSDIR/broker.p12" >/dev/null 2>&1 || die "keytool: CA import"
  "${kt[@]}" -importcert -alias broker -file "$TLSDIR/broker.pem" -keystore "$TLSDIR/broker.p12" >/dev/null 2>&1 || die "keytool: broker import"
  "${kt[@]}" -genkeypair -alias client -keyalg EC -groupname secp256r1 -dname "CN=statecast-client" \
    -validity 3650 -keystore "$TLSDIR/client.p12" >/dev/null 2>&1 || die "keytool: client key"
  "${kt[@]}" -certreq -alias client -keystore "$TLSDIR/client.p12" -file "$TLSDIR/client.csr" >/dev/null 2>&1 || die "keytool: client request"
  "${kt[@]}" -gencert -alias ca -keystore "$TLSDIR/ca.p12" -infile "$TLSDIR/client.csr" -outfile "$TLSDIR/client.pem" -rfc \
    -ext EKU=clientAuth -validity 3650 >/dev/null 2>&1 || die "keytool: client certificate"
  (umask 077; java "$REPO/deploy/local/PemKey.java" "$TLSDIR/client.p12" "$pw" client >"$TLSDIR/client.key") || die "PemKey: client key"
  rm -f "$TLSDIR/ca.p12" "$TLSDIR/broker.csr" "$TLSDIR/client.csr" "$TLSDIR/client.p12" # the CA's key is not needed any more
}

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
  stop
  if resumable; then launch; return; fi
  rm -rf "$DIR"; mkdir -p "$DIR/data"
  local port cport sport mport; port=$(free_port); cport=$(free_port); sport=$(free_port); mport=$(free_port)
  while [ "$cport" = "$port" ]; do cport=$(free_port); done
  while [ "$sport" = "$port" ] || [ "$sport" = "$cport" ]; do sport=$(free_port); done
  while [ "$mport" = "$port" ] || [ "$mport" = "$cport" ] || [ "$mport" = "$sport" ]; do mport=$(free_port); done
  local storepw saslpw
  storepw=$(python3 -c 'import secrets; print(secrets.token_hex(16))')
  saslpw=$(python3 -c 'import secrets; print(secrets.token_hex(16))')
  (umask 077; echo "$saslpw" >"$DIR/sasl.password")
  make_tls "$storepw"
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
listeners=PLAINTEXT://127.0.0.1:$port,SASL_SSL://127.0.0.1:$sport,SSL://127.0.0.1:$mport,CONTROLLER://127.0.0.1:$cport
advertised.listeners=PLAINTEXT://127.0.0.1:$port,SASL_SSL://127.0.0.1:$sport,SSL://127.0.0.1:$mport
controller.listener.names=CONTROLLER
inter.broker.listener.name=PLAINTEXT
listener.security.protocol.map=PLAINTEXT:PLAINTEXT,SASL_SSL:SASL_SSL,SSL:SSL,CONTROLLER:PLAINTEXT
sasl.enabled.mechanisms=SCRAM-SHA-256,SCRAM-SHA-512,PLAIN
listener.name.sasl_ssl.scram-sha-256.sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required;
listener.name.sasl_ssl.scram-sha-512.sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required;
listener.name.sasl_ssl.plain.sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule required user_$SASL_USER="$saslpw";
ssl.keystore.type=PKCS12
ssl.keystore.location=$TLSDIR/broker.p12
ssl.keystore.password=$storepw
ssl.key.password=$storepw
ssl.client.auth=none
listener.name.ssl.ssl.client.auth=required
ssl.truststore.type=PKCS12
ssl.truststore.location=$TLSDIR/broker.p12
ssl.truststore.password=$storepw
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
  add_listeners
  chmod 600 "$DIR/server.properties"
  script_sum >"$DIR/script.sum"
  java_run kafka.tools.StorageTool format -t "$(java_run kafka.tools.StorageTool random-uuid)" \
    -c "$DIR/server.properties" \
    --add-scram "SCRAM-SHA-256=[name=$SASL_USER,password=$saslpw]" \
    --add-scram "SCRAM-SHA-512=[name=$SASL_USER,password=$saslpw]" \
    >"$DIR/format.log" 2>&1 || { cat "$DIR/format.log" >&2; die "storage format failed"; }
  echo "$port" >"$PORTFILE"
  echo "$sport" >"$SASLPORTFILE"
  echo "$mport" >"$MTLSPORTFILE"
  nohup java -Xms256m -Xmx1g -XX:+UseG1GC -Djava.awt.headless=true \
    -Dlog4j2.configurationFile="$DIR/log4j2.properties" -cp "$LIBS/*" \
    kafka.Kafka "$DIR/server.properties" >"$DIR/stdout.log" 2>&1 &
  echo $! >"$PIDFILE"
  for _ in $(seq 1 120); do
    if port_open 127.0.0.1 "$port" && port_open 127.0.0.1 "$sport" && port_open 127.0.0.1 "$mport" && grep -q "Kafka Server started\|\[KafkaRaftServer nodeId=1\] Kafka Server started" "$DIR/server.log" 2>/dev/null; then
      log "Kafka $VERSION ready on 127.0.0.1:$port, SASL_SSL on 127.0.0.1:$sport, mutual TLS on 127.0.0.1:$mport (log $DIR/server.log)"; env_out; return
    fi
    pid_alive "$PIDFILE" || { tail -30 "$DIR/stdout.log" "$DIR/server.log" >&2 2>/dev/null; die "kafka exited"; }
    sleep 0.5
  done
  die "kafka not ready after 60s (see $DIR/server.log)"
}

# script_sum identifies this version of the script: a config it did not write is not reused.
script_sum() { md5sum <"${BASH_SOURCE[0]}" | cut -c1-32; }

# add_listeners appends the listeners of STATECAST_KAFKA_LISTENERS to server.properties.
add_listeners() {
  local l name port adv props=$DIR/server.properties
  for l in ${STATECAST_KAFKA_LISTENERS:-}; do
    IFS=: read -r name port adv <<<"$l"
    [[ $name =~ ^[A-Z][A-Z0-9_]*$ && $port =~ ^[0-9]+$ && $adv =~ ^[0-9]+$ ]] ||
      die "STATECAST_KAFKA_LISTENERS: $l is not NAME:PORT:ADVERTISED_PORT"
    sed -i -e "s|^listeners=.*|&,$name://127.0.0.1:$port|" \
      -e "s|^advertised.listeners=.*|&,$name://127.0.0.1:$adv|" \
      -e "s|^listener.security.protocol.map=.*|&,$name:PLAINTEXT|" "$props"
  done
}

# ports lists the ports the broker listens on (from its config).
ports() { sed -n 's|^listeners=||p' "$DIR/server.properties" | tr ',' '\n' | sed 's|.*:||'; }

# resumable succeeds when the broker's storage, config and ports can be reused as they are.
resumable() {
  [ -f "$DIR/data/meta.properties" ] && [ -f "$DIR/server.properties" ] && [ -f "$PORTFILE" ] &&
    [ -f "$SASLPORTFILE" ] && [ -f "$DIR/sasl.password" ] && [ -f "$TLSDIR/ca.pem" ] &&
    [ -f "$MTLSPORTFILE" ] && [ -f "$TLSDIR/client.key" ] || return 1
  [ "$(cat "$DIR/script.sum" 2>/dev/null)" = "$(script_sum)" ] || { log "config written by another version of this script: formatting afresh"; return 1; }
  local p
  for p in $(ports); do
    if port_open 127.0.0.1 "$p"; then log "warning: port $p is taken by another process: formatting afresh on new ports"; return 1; fi
  done
}

# launch starts the broker on its existing storage and config and waits until it answers.
launch() {
  local port from; port=$(cat "$PORTFILE")
  from=$(stat -c %s "$DIR/server.log" 2>/dev/null || echo 0)
  nohup java -Xms256m -Xmx1g -XX:+UseG1GC -Djava.awt.headless=true \
    -Dlog4j2.configurationFile="$DIR/log4j2.properties" -cp "$LIBS/*" \
    kafka.Kafka "$DIR/server.properties" >>"$DIR/stdout.log" 2>&1 &
  echo $! >"$PIDFILE"
  for _ in $(seq 1 120); do
    # Only the lines written since this launch count: the log keeps the previous runs'.
    if port_open 127.0.0.1 "$port" && tail -c +$((from + 1)) "$DIR/server.log" 2>/dev/null | grep -q "Kafka Server started"; then
      log "Kafka $VERSION restarted on 127.0.0.1:$port with its data (log $DIR/server.log)"; env_out; return
    fi
    pid_alive "$PIDFILE" || { tail -30 "$DIR/stdout.log" "$DIR/server.log" >&2 2>/dev/null; die "kafka exited"; }
    sleep 0.5
  done
  die "kafka not ready after 60s (see $DIR/server.log)"
}

stop() {
  pid_alive "$PIDFILE" || return 0
  kill -CONT "$(cat "$PIDFILE")" 2>/dev/null || true # a paused JVM cannot handle SIGTERM
  kill "$(cat "$PIDFILE")"
  for _ in $(seq 1 40); do pid_alive "$PIDFILE" || return 0; sleep 0.5; done
  kill -9 "$(cat "$PIDFILE")" 2>/dev/null || true
}

case "${1:-start}" in
  start) start ;;
  stop) stop ;;
  env) running || die "not running"; env_out ;;
  status) running && echo running || { echo stopped; exit 1; } ;;
  restart) stop; start ;;
  wipe) stop; rm -rf "$DIR" ;;
  fetch) fetch ;;
  *) die "usage: $0 start|stop|restart|wipe|env|status|fetch" ;;
esac
