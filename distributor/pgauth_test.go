package distributor

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/statecast/statecast/internal/testenv"
	"github.com/statecast/statecast/kafkaconn"
)

// authCluster is a dedicated PostgreSQL whose pg_hba.conf asks for passwords (the shared
// test cluster trusts every local connection): postgres is trusted, pw_user must give its
// SCRAM password, norepl_user is trusted but has no REPLICATION, and nohba_user has no
// pg_hba.conf entry at all.
func authCluster(t *testing.T) (admin string, dsn func(user, password string) string) {
	t.Helper()
	// The server runs as the postgres user: the file must be readable outside the test's
	// private temporary directory.
	hba := filepath.Join(os.TempDir(), testenv.UniqueName("statecast-hba")+".conf")
	rules := `host all postgres 127.0.0.1/32 trust
host replication postgres 127.0.0.1/32 trust
host all pw_user 127.0.0.1/32 scram-sha-256
host replication pw_user 127.0.0.1/32 scram-sha-256
host all norepl_user 127.0.0.1/32 trust
host replication norepl_user 127.0.0.1/32 trust
local all all trust
`
	if err := os.WriteFile(hba, []byte(rules), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.Remove(hba) })
	pg := testenv.DedicatedPostgres(t, fmt.Sprintf("hba_file = '%s'", hba), "password_encryption = 'scram-sha-256'")
	ctx := context.Background()
	c, err := pgx.Connect(ctx, pg.DSN)
	if err != nil {
		t.Fatal(err)
	}
	defer closeConn(c)
	for _, sql := range []string{
		`CREATE ROLE pw_user LOGIN REPLICATION PASSWORD 'right-password'`,
		`CREATE ROLE norepl_user LOGIN`,
		`CREATE ROLE nohba_user LOGIN`,
		`CREATE TABLE items (id int PRIMARY KEY, name text)`,
		`ALTER TABLE items OWNER TO norepl_user`,
		`GRANT CREATE ON DATABASE postgres TO norepl_user`,
		`INSERT INTO items VALUES (1, 'one')`,
	} {
		if _, err := c.Exec(ctx, sql); err != nil {
			t.Fatalf("%s: %v", sql, err)
		}
	}
	return pg.DSN, func(user, password string) string {
		u, err := url.Parse(pg.DSN)
		if err != nil {
			t.Fatal(err)
		}
		if password == "" {
			u.User = url.User(user)
		} else {
			u.User = url.UserPassword(user, password)
		}
		return u.String()
	}
}

// TestPostgresLoginRefused: a login PostgreSQL refuses — a wrong password, no pg_hba.conf
// entry, a role without REPLICATION for a wal stream — stops Run at once with
// ErrPostgresAuth naming the refusal (as a refused Kafka login does), instead of retrying
// as a standby forever; the same refusal is the stream's last error until then.
func TestPostgresLoginRefused(t *testing.T) {
	_, dsn := authCluster(t)
	brokers := testenv.KafkaBrokers(t)
	for _, tc := range []struct {
		name, dsn, capture string
		want               []string // in the error
	}{
		{"wrong password", dsn("pw_user", "wrong-password"), CapturePoll,
			[]string{"wrong password", "28P01", `password authentication failed for user "pw_user"`}},
		{"no pg_hba entry", dsn("nohba_user", ""), CapturePoll,
			[]string{"pg_hba.conf", "28000", `no pg_hba.conf entry for host "127.0.0.1", user "nohba_user"`}},
		{"no REPLICATION", dsn("norepl_user", ""), CaptureWAL,
			[]string{"REPLICATION", "42501", "replication connection"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			topic := testenv.UniqueName("auth")
			deleteTopicLater(t, brokers, topic)
			cfg := Config{
				Postgres: PostgresConfig{DSN: tc.dsn},
				Kafka:    KafkaConfig{Config: kafkaconn.Config{Brokers: brokers, ClientID: "test"}},
				Streams: []StreamConfig{{Topic: topic, Capture: tc.capture,
					Views: []ViewConfig{{Name: "items", SQL: "SELECT id, name FROM items", Key: []string{"id"}}}}},
			}
			d, err := New(cfg, WithLogger(testLogger(t)))
			if err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			began := time.Now()
			err = d.Run(ctx)
			if !errors.Is(err, ErrPostgresAuth) {
				t.Fatalf("Run = %v, want ErrPostgresAuth", err)
			}
			var pe *pgconn.PgError
			if !errors.As(err, &pe) {
				t.Errorf("Run's error %v does not wrap the server's", err)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("Run's error lacks %q:\n%v", w, err)
				}
			}
			if took := time.Since(began); took > time.Minute {
				t.Errorf("Run stopped after %s: not at once", took)
			}
			if strings.Contains(err.Error(), "wrong-password") {
				t.Errorf("the error shows the password: %v", err)
			}
			st := d.Status()
			if len(st) != 1 || !strings.Contains(st[0].LastError, pe.Code) {
				t.Errorf("Status %+v: want the refusal as the stream's last error", st)
			}
		})
	}
}

// TestPostgresUnreachableRetried: what is not a refused login — no server listening, a
// database that does not exist (yet) — is retried as a standby, and shown as the stream's
// last error in Status and /readyz (with PostgreSQL down there), until Run is stopped.
func TestPostgresUnreachableRetried(t *testing.T) {
	admin, _ := authCluster(t)
	brokers := testenv.KafkaBrokers(t)
	noDB, err := url.Parse(admin)
	if err != nil {
		t.Fatal(err)
	}
	noDB.Path = "/no_such_database"
	for _, tc := range []struct{ name, dsn, want string }{
		{"no server", "postgres://postgres@127.0.0.1:1/postgres?sslmode=disable&connect_timeout=2", "127.0.0.1:1"},
		{"no database", noDB.String(), `database "no_such_database" does not exist`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			topic := testenv.UniqueName("unreach")
			deleteTopicLater(t, brokers, topic)
			cfg := Config{
				Postgres:       PostgresConfig{DSN: tc.dsn},
				Kafka:          KafkaConfig{Config: kafkaconn.Config{Brokers: brokers, ClientID: "test"}},
				HealthInterval: 200 * time.Millisecond,
				Streams: []StreamConfig{{Topic: topic, Capture: CapturePoll,
					Views: []ViewConfig{{Name: "items", SQL: "SELECT id, name FROM items", Key: []string{"id"}}}}},
			}
			r := start(t, cfg)
			waitCond(t, "the connection error as the stream's last error", func() bool {
				st := r.d.Status()
				return len(st) == 1 && strings.Contains(st[0].LastError, tc.want) && st[0].LastErrorOp == "lock"
			})
			waitCond(t, "/readyz with PostgreSQL down and the stream's last error", func() bool {
				rd := r.d.Readiness()
				return !rd.Ready && !rd.Postgres.OK && rd.Kafka.OK && strings.Contains(rd.LastErrors[topic], tc.want) &&
					rd.Streams[topic] == "standby"
			})
			time.Sleep(3 * time.Second) // more than one retry of the lock
			select {
			case <-r.finished:
				t.Fatalf("Run stopped: %v; want it retrying", r.err)
			default:
			}
		})
	}
}
