package testenv

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/IBM/sarama"
	"github.com/jackc/pgx/v5"

	"github.com/statecast/statecast/kafkaconn"
)

// Env variable names exported by deploy/local/up.sh.
const (
	EnvPostgresDSN  = "STATECAST_PG_DSN"
	EnvKafkaBrokers = "STATECAST_KAFKA_BROKERS"
	// The broker's SASL_SSL listener: its address, the PEM of the CA that signed its
	// certificate, the SASL mechanism to use (SCRAM-SHA-256 and PLAIN work too), the user
	// and the password.
	EnvKafkaSASLBrokers   = "STATECAST_KAFKA_SASL_BROKERS"
	EnvKafkaSASLCA        = "STATECAST_KAFKA_SASL_CA"
	EnvKafkaSASLMechanism = "STATECAST_KAFKA_SASL_MECHANISM"
	EnvKafkaSASLUser      = "STATECAST_KAFKA_SASL_USER"
	EnvKafkaSASLPassword  = "STATECAST_KAFKA_SASL_PASSWORD"
	// The broker's SSL listener that requires a client certificate (mutual TLS): its
	// address, the CA's PEM, and a client certificate and key (PEM) signed by that CA.
	EnvKafkaMTLSBrokers = "STATECAST_KAFKA_MTLS_BROKERS"
	EnvKafkaMTLSCA      = "STATECAST_KAFKA_MTLS_CA"
	EnvKafkaMTLSCert    = "STATECAST_KAFKA_MTLS_CERT"
	EnvKafkaMTLSKey     = "STATECAST_KAFKA_MTLS_KEY"
)

// InCI reports whether the tests run under CI, where missing servers are failures.
func InCI() bool {
	v := strings.ToLower(os.Getenv("CI"))
	return v != "" && v != "0" && v != "false"
}

func missing(t testing.TB, what, env string) {
	t.Helper()
	msg := fmt.Sprintf("%s not configured: %s is empty (run `make test`, or `eval $(deploy/local/up.sh)`)", what, env)
	if InCI() {
		t.Fatal(msg)
	}
	t.Skip(msg)
}

// PostgresDSN returns the DSN of the local PostgreSQL server (its 'postgres' database).
func PostgresDSN(t testing.TB) string {
	t.Helper()
	dsn := os.Getenv(EnvPostgresDSN)
	if dsn == "" {
		missing(t, "PostgreSQL", EnvPostgresDSN)
	}
	return dsn
}

// KafkaBrokers returns the addresses of the local Kafka broker.
func KafkaBrokers(t testing.TB) []string {
	t.Helper()
	b := os.Getenv(EnvKafkaBrokers)
	if b == "" {
		missing(t, "Kafka", EnvKafkaBrokers)
	}
	return strings.Split(b, ",")
}

// KafkaSASL returns the connection to the local broker's SASL_SSL listener (TLS verified
// with the test CA, SASL with the mechanism, user and password deploy/local exported),
// validated, with client id "testenv". It is the same broker as KafkaBrokers': topics made
// with NewTopic are there too.
func KafkaSASL(t testing.TB) kafkaconn.Config {
	t.Helper()
	vals := map[string]string{}
	for _, name := range []string{EnvKafkaSASLBrokers, EnvKafkaSASLCA, EnvKafkaSASLMechanism, EnvKafkaSASLUser, EnvKafkaSASLPassword} {
		if vals[name] = os.Getenv(name); vals[name] == "" {
			missing(t, "Kafka's SASL_SSL listener", name)
		}
	}
	return saslConfig(t, vals[EnvKafkaSASLBrokers], vals[EnvKafkaSASLCA], vals[EnvKafkaSASLMechanism], vals[EnvKafkaSASLUser], vals[EnvKafkaSASLPassword])
}

func saslConfig(t testing.TB, brokers, ca, mechanism, user, password string) kafkaconn.Config {
	t.Helper()
	c := kafkaconn.Config{Brokers: strings.Split(brokers, ","), ClientID: "testenv", Timeout: 30 * time.Second,
		TLS:  kafkaconn.TLS{Enabled: true, CAFile: ca},
		SASL: kafkaconn.SASL{Mechanism: mechanism, User: user, Password: password}}
	if err := c.Validate(); err != nil {
		t.Fatalf("testenv: the SASL_SSL listener's settings: %v", err)
	}
	return c
}

// KafkaMTLS returns the connection to the local broker's mutual-TLS listener (the broker
// verified with the test CA, the client authenticated by the certificate deploy/local
// made), validated, with client id "testenv". It is the same broker as KafkaBrokers'.
func KafkaMTLS(t testing.TB) kafkaconn.Config {
	t.Helper()
	vals := map[string]string{}
	for _, name := range []string{EnvKafkaMTLSBrokers, EnvKafkaMTLSCA, EnvKafkaMTLSCert, EnvKafkaMTLSKey} {
		if vals[name] = os.Getenv(name); vals[name] == "" {
			missing(t, "Kafka's mutual-TLS listener", name)
		}
	}
	c := kafkaconn.Config{Brokers: strings.Split(vals[EnvKafkaMTLSBrokers], ","), ClientID: "testenv", Timeout: 30 * time.Second,
		TLS: kafkaconn.TLS{Enabled: true, CAFile: vals[EnvKafkaMTLSCA], CertFile: vals[EnvKafkaMTLSCert], KeyFile: vals[EnvKafkaMTLSKey]}}
	if err := c.Validate(); err != nil {
		t.Fatalf("testenv: the mutual-TLS listener's settings: %v", err)
	}
	return c
}

// SecuredKafka is one of the broker's secured listeners.
type SecuredKafka struct {
	Name string // "sasl_ssl" or "mtls"
	Conn kafkaconn.Config
}

// KafkaSecured returns the local broker's secured listeners, SASL_SSL and mutual TLS, for
// tests that run a component through each.
func KafkaSecured(t testing.TB) []SecuredKafka {
	t.Helper()
	return []SecuredKafka{{"sasl_ssl", KafkaSASL(t)}, {"mtls", KafkaMTLS(t)}}
}

// UniqueName returns prefix plus a random suffix, usable as a database or topic name.
func UniqueName(prefix string) string {
	var b [6]byte
	_, _ = rand.Read(b[:])
	return prefix + "_" + hex.EncodeToString(b[:])
}

// NewDatabase creates a fresh database on the local server, drops it when the test ends,
// and returns its DSN.
func NewDatabase(t testing.TB) string {
	t.Helper()
	admin := PostgresDSN(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, admin)
	if err != nil {
		t.Fatalf("testenv: connect to PostgreSQL: %v", err)
	}
	defer conn.Close(ctx)
	name := UniqueName("t")
	if _, err := conn.Exec(ctx, "CREATE DATABASE "+name); err != nil {
		t.Fatalf("testenv: create database: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		c, err := pgx.Connect(ctx, admin)
		if err != nil {
			return
		}
		defer c.Close(ctx)
		dropSlots(ctx, c, name)
		_, _ = c.Exec(ctx, "DROP DATABASE IF EXISTS "+name+" WITH (FORCE)")
	})
	cfg, err := pgx.ParseConfig(admin)
	if err != nil {
		t.Fatalf("testenv: parse DSN: %v", err)
	}
	return fmt.Sprintf("postgres://%s@%s:%d/%s?sslmode=disable", cfg.User, cfg.Host, cfg.Port, name)
}

// dropSlots drops the replication slots of database db (a test's distributor leaves its
// slot; a database that has one cannot be dropped), ending the connections that stream
// from them first.
func dropSlots(ctx context.Context, c *pgx.Conn, db string) {
	for attempt := 0; attempt < 50 && ctx.Err() == nil; attempt++ {
		var left int
		_, _ = c.Exec(ctx, "SELECT pg_terminate_backend(active_pid) FROM pg_replication_slots WHERE database = $1 AND active_pid IS NOT NULL", db)
		_, _ = c.Exec(ctx, "SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots WHERE database = $1 AND active_pid IS NULL", db)
		if err := c.QueryRow(ctx, "SELECT count(*) FROM pg_replication_slots WHERE database = $1", db).Scan(&left); err != nil || left == 0 {
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// NewTopic creates a one-partition topic with a unique name and the given configs
// (for example cleanup.policy=compact), deletes it when the test ends, and returns its name.
func NewTopic(t testing.TB, prefix string, configs map[string]string) string {
	t.Helper()
	brokers := KafkaBrokers(t)
	admin, err := sarama.NewClusterAdmin(brokers, kafkaconn.NewConfig("testenv"))
	if err != nil {
		t.Fatalf("testenv: kafka admin: %v", err)
	}
	defer admin.Close()
	name := UniqueName(prefix)
	entries := map[string]*string{}
	for k, v := range configs {
		entries[k] = &v
	}
	err = admin.CreateTopic(name, &sarama.TopicDetail{NumPartitions: 1, ReplicationFactor: 1, ConfigEntries: entries}, false)
	if err != nil {
		t.Fatalf("testenv: create topic %s: %v", name, err)
	}
	t.Cleanup(func() {
		a, err := sarama.NewClusterAdmin(brokers, kafkaconn.NewConfig("testenv"))
		if err != nil {
			return
		}
		defer a.Close()
		_ = a.DeleteTopic(name)
	})
	return name
}

// NewTopicPartitions is NewTopic with the given number of partitions (grown from one).
func NewTopicPartitions(t testing.TB, prefix string, partitions int32, configs map[string]string) string {
	t.Helper()
	name := NewTopic(t, prefix, configs)
	if partitions <= 1 {
		return name
	}
	admin, err := sarama.NewClusterAdmin(KafkaBrokers(t), kafkaconn.NewConfig("testenv"))
	if err != nil {
		t.Fatalf("testenv: kafka admin: %v", err)
	}
	defer admin.Close()
	if err := admin.CreatePartitions(name, partitions, nil, false); err != nil {
		t.Fatalf("testenv: grow topic %s to %d partitions: %v", name, partitions, err)
	}
	// The broker's metadata may show the new partitions a moment after the call returns:
	// wait until a client sees them all with a leader, so a test that reads them at once
	// finds them.
	cl, err := sarama.NewClient(KafkaBrokers(t), kafkaconn.NewConfig("testenv"))
	if err != nil {
		t.Fatalf("testenv: kafka client: %v", err)
	}
	defer cl.Close()
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		if cl.RefreshMetadata(name) == nil {
			if ps, err := cl.Partitions(name); err == nil && len(ps) == int(partitions) {
				led := 0
				for _, p := range ps {
					if _, err := cl.Leader(name, p); err == nil {
						led++
					}
				}
				if led == len(ps) {
					return name
				}
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("testenv: topic %s: %d partitions not all visible with a leader after 30 s", name, partitions)
		}
	}
}
