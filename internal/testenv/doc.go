// Package testenv gives integration tests the real PostgreSQL and Kafka started by
// deploy/local (make test exports their addresses).
//
// Outside CI a test whose server is missing is skipped with a message saying how to start
// it; under CI (CI=true) it fails instead, so a broken environment can never pass as green.
//
// Files:
//
//   - testenv.go: the shared servers (PostgresDSN, KafkaBrokers, the secured listeners
//     KafkaSASL, KafkaMTLS and KafkaSecured), a fresh database (NewDatabase) or topic
//     (NewTopic, NewTopicPartitions) per test, UniqueName, InCI;
//   - kafka.go: servers of a test's own, which it may stop, pause, kill and restart
//     (DedicatedKafka, DedicatedPostgres), through the scripts of deploy/local;
//   - cluster.go: a KRaft cluster of a test's own (DedicatedKafkaCluster), whose nodes it
//     may kill, pause, wipe and restart one by one (deploy/local/kafka-cluster.sh);
//   - proxy.go: a faultproxy in front of a server, closed at the test's end (NewProxy,
//     PostgresProxy);
//   - proc.go and exit.go: the repository's commands built and run as processes
//     (BuildCommand, StartCommand and Proc, RunCommand), and NoSecrets, which fails a test
//     whose output shows a secret;
//   - pki.go: a throw-away CA and its server and client certificates (NewPKI);
//   - net.go (FreeAddr), buffer.go (LockedBuffer, an output sink written by other
//     goroutines), shape.go (SameFields, two config types kept field for field alike).
//
// What a helper starts or creates (a server, a database, a topic, a process, a proxy,
// files) ends with the test that asked for it (t.Cleanup, t.TempDir): the package is for
// tests only.
package testenv
