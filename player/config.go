package player

import (
	"errors"
	"fmt"
	"log/slog"
	"path"
	"time"

	"github.com/statecast/statecast/internal/daemon"
	"github.com/statecast/statecast/kafkaconn"
)

// Defaults of Config (documented on its fields).
const (
	DefaultClientID          = "statecast-player"
	DefaultMaxBatchEntries   = 512
	DefaultMaxBatchBytes     = 1 << 20
	DefaultTargetBudgetBytes = 16 << 20
	DefaultAckTimeout        = 30 * time.Second
	DefaultProgressInterval  = time.Second
	DefaultHistoryBytes      = 64 << 20
	DefaultShutdownGrace     = 5 * time.Second
	// DefaultStartupTimeout bounds how long Run retries reaching Kafka at start-up (a
	// broker that starts after the player, as in a compose file or a fresh cluster): the
	// distributor's default.
	DefaultStartupTimeout = 2 * time.Minute

	// DefaultListen and DefaultHTTPAddr are the daemon's addresses: LoadConfig and
	// ParseConfig use them when the file does not set listen and http_addr. A Config built
	// in Go serves neither unless it sets them.
	DefaultListen   = ":7070"
	DefaultHTTPAddr = ":7071"
	// DefaultAdminAddr is the admin endpoint's address in a file that does not set
	// admin.addr: this host only, so that the status pages need no token.
	DefaultAdminAddr = "127.0.0.1:7072"

	DefaultMaxStreamsPerConn = 100
	DefaultMaxHelloViews     = 1024
	DefaultMaxHelloBytes     = 64 << 10
	DefaultMaxSnapshotBytes  = 1 << 30
	// DefaultMaxRecordBytes is what a gRPC client receives by default (4 MiB) less
	// RecordFrameRoom.
	DefaultMaxRecordBytes = 4<<20 - RecordFrameRoom
	// RecordFrameRoom is the room kept in a client's receive limit for the frame around
	// one record (and around a batch's entries): a client receiving at most n bytes is
	// served records up to n - RecordFrameRoom and batches cut to that.
	RecordFrameRoom         = 1 << 10
	DefaultKeepaliveMinTime = 10 * time.Second

	DefaultMaxConns                       = 4096
	DefaultMaxUnauthenticatedConns        = 256
	DefaultAuthTimeout                    = 10 * time.Second
	DefaultAuthFailureDelay               = time.Second
	DefaultMaxTargetsPerPrincipal         = 1024
	DefaultMaxKafkaRecoveriesPerPrincipal = 16
	DefaultMaxServiceLabels               = 256
	DefaultKeepaliveTime                  = 30 * time.Second
	DefaultKeepaliveTimeout               = 10 * time.Second
)

// StreamConfig is one stream served by the player.
type StreamConfig struct {
	// Name is what clients put in Hello.stream.
	Name string `yaml:"name"`
	// Topic is the Kafka topic (one partition). Default: Name.
	Topic string `yaml:"topic"`
	// Views declares views of the stream (patterns in path.Match syntax allowed) that a
	// client may subscribe to before any record of them is in the log. A Hello naming a
	// view that is neither seen in the log nor declared here is refused (ErrUnknownView),
	// so that a misspelt view is an error rather than an empty cache; "*" accepts any name.
	Views []string `yaml:"views"`
}

// Keepalive is the gRPC server's keepalive (Config.Keepalive). Zero fields take the
// defaults.
type Keepalive struct {
	// MinTime: a client that pings more often than this is disconnected (GOAWAY
	// too_many_pings). Default 10s.
	MinTime time.Duration `yaml:"min_time"`
	// Time: an idle connection is pinged after this long; Timeout: it is closed when the
	// ping is not answered within this. Defaults 30s and 10s.
	Time    time.Duration `yaml:"time"`
	Timeout time.Duration `yaml:"timeout"`
}

// Config of a Player. Zero values take the documented defaults; negative durations,
// counts and sizes are refused (Validate).
type Config struct {
	// Listen is the address Run serves gRPC on (Player, health, reflection when enabled).
	// Empty: Run does not serve gRPC; Serve does, on a listener of the caller's.
	Listen string `yaml:"listen"`
	// HTTPAddr is the address Run serves the read-only HTTP endpoint on (Handler:
	// /metrics, /livez, /readyz, /healthz). Empty: not served.
	HTTPAddr string `yaml:"http_addr"`
	// Admin is the admin HTTP endpoint (AdminHandler: /status, /status.json, which show
	// client identities): not served when Admin.Addr is empty; it needs Admin.Tokens
	// unless it listens on a loopback address.
	Admin AdminConfig `yaml:"admin"`

	// Insecure serves gRPC in plaintext (no TLS); the player then logs a warning when it
	// starts serving. Either Insecure or TLS is required.
	Insecure bool `yaml:"insecure"`
	// TLS is the gRPC server's certificate (and client CAs for mutual TLS).
	TLS TLSConfig `yaml:"tls"`
	// Tokens are the clients' bearer tokens. With tokens (or client CAs), every Subscribe
	// must authenticate; without both, every client is the anonymous principal.
	Tokens TokensConfig `yaml:"tokens"`
	// Access grants principals streams and views. Empty: every authenticated principal may
	// read every stream and view.
	Access []Grant `yaml:"access"`
	// ReloadInterval: how often the TLS and token files are read again to pick up a
	// rotation (compared by content). Default 5s.
	ReloadInterval time.Duration `yaml:"reload_interval"`
	// Reflection registers the gRPC reflection service (authenticated like Subscribe).
	// Off by default.
	Reflection bool `yaml:"reflection"`
	// MaxStreamsPerConn bounds the concurrent streams of one client connection (HTTP/2
	// MAX_CONCURRENT_STREAMS). Default 100; a cacheclient uses one.
	MaxStreamsPerConn uint32 `yaml:"max_streams_per_conn"`
	// MaxHelloViews bounds the views one Hello may name (default 1024): admission checks
	// them under the stream lock that dispatch needs.
	MaxHelloViews int `yaml:"max_hello_views"`
	// MaxHelloBytes bounds every message a client sends (a Hello; Acks are a few bytes):
	// the gRPC server's receive limit (default 64 KiB).
	MaxHelloBytes int `yaml:"max_hello_bytes"`
	// MaxSnapshotBytes bounds the bytes of the rows that snapshots not yet sent may pin,
	// over all streams (default 1 GiB): a snapshot holds the rows of the materialized copy
	// at its index, which the stream replaces meanwhile, so a slow or stalled client could
	// otherwise keep a full copy of the data alive. A subscription whose snapshot does not
	// fit is refused (ResourceExhausted; the client retries); one snapshot is always
	// admitted when none is pending, however large.
	MaxSnapshotBytes int64 `yaml:"max_snapshot_bytes"`
	// MaxRecordBytes bounds one record's frame (key, value and headers): a record over it
	// is skipped, logged with its offset and key and counted, never sent. Default
	// DefaultMaxRecordBytes, what a client receives by default; raise it with the topic's
	// max.message.bytes and the clients' receive limit (cacheclient: Config.MaxReceiveBytes).
	// A client whose receive limit (Hello.max_message_bytes) is below it plus
	// RecordFrameRoom is refused with FailedPrecondition naming both.
	MaxRecordBytes int `yaml:"max_record_bytes"`
	// Keepalive: the server's pings and its limit on the clients' pings.
	Keepalive Keepalive `yaml:"keepalive"`
	// MaxConns bounds the gRPC connections open at once (default 4096; each costs about
	// 60 KiB idle): one past it is closed as soon as it is accepted.
	MaxConns int `yaml:"max_connections"`
	// MaxUnauthenticatedConns bounds the connections open at once that have not yet made an
	// authenticated call (default 256): one past it is closed as soon as it is accepted.
	// Health checks do not authenticate a connection.
	MaxUnauthenticatedConns int `yaml:"max_unauthenticated_connections"`
	// AuthTimeout bounds the time from a connection's accept to its first authenticated
	// call, the TLS handshake included (default 10s): past it the connection is closed. A
	// connection that only asks for health is closed too (probes connect for each check).
	AuthTimeout time.Duration `yaml:"auth_timeout"`
	// AuthFailureDelay is how long a call whose authentication failed waits before it is
	// refused (default 1s); its connection is then closed, so that one connection tries
	// at most max_streams_per_conn tokens, once.
	AuthFailureDelay time.Duration `yaml:"auth_failure_delay"`
	// MaxTargetsPerPrincipal bounds the targets one principal has open at once, over all
	// streams (default 1024; without authentication every client is the one anonymous
	// principal): one past it is refused with ResourceExhausted.
	MaxTargetsPerPrincipal int `yaml:"max_targets_per_principal"`
	// MaxKafkaRecoveriesPerPrincipal bounds the recoveries of one principal that read Kafka
	// at once, each with a consumer of its own (default 16): one past it waits for one to
	// end (recoveries from memory are not bounded).
	MaxKafkaRecoveriesPerPrincipal int `yaml:"max_kafka_recoveries_per_principal"`
	// MaxServiceLabels bounds the service names that get series of their own in the
	// per-target metrics (default 256; client-chosen, they are label values): the targets
	// of services first seen past it are counted under the service "_other".
	MaxServiceLabels int `yaml:"max_service_labels"`

	// Kafka is the connection to Kafka: brokers (required), client_id (default
	// DefaultClientID), timeout, tls, sasl (kafkaconn.Config, as the distributor's kafka
	// block).
	Kafka kafkaconn.Config `yaml:"kafka"`
	// StartupTimeout bounds how long Run retries, with backoff, reaching Kafka when it does
	// not answer at start-up (/livez answers meanwhile, /readyz is 503); then Run fails
	// with ErrKafkaUnreachable naming the brokers. A refusal (TLS, SASL) fails at once.
	// Default DefaultStartupTimeout. (Once Kafka answered, a stream whose topic cannot be
	// served is retried without bound, unavailable alone.)
	StartupTimeout time.Duration `yaml:"startup_timeout"`
	// Streams served (at least one).
	Streams []StreamConfig `yaml:"streams"`
	// MaxBatchEntries bounds a batch's entry count (default 512); a client hint may lower it.
	MaxBatchEntries int `yaml:"max_batch_entries"`
	// MaxBatchBytes bounds a batch's size (default 1 MiB); a client hint may lower it.
	MaxBatchBytes int64 `yaml:"max_batch_bytes"`
	// TargetBudgetBytes bounds the memory queued for one target (normal + catch-up
	// queues, default 16 MiB). Past it the target's main queue is dropped and it continues
	// from Kafka in RF without being disconnected. Sent-but-unacked batches are bounded by
	// the same amount (the send window). At least twice MaxBatchBytes.
	TargetBudgetBytes int64 `yaml:"target_budget_bytes"`
	// AckTimeout: a target with unacknowledged batches older than this, or whose send has
	// been blocked this long (the client stopped reading, in a snapshot too), is suspended
	// (default 30s).
	AckTimeout time.Duration `yaml:"ack_timeout"`
	// ProgressInterval: a target in N that was sent nothing for this long gets a Progress
	// message (default 1s).
	ProgressInterval time.Duration `yaml:"progress_interval"`
	// DeleteRetention overrides the topic's delete.retention.ms (the tombstone horizon).
	// Default (0): read from the broker at start-up.
	DeleteRetention time.Duration `yaml:"delete_retention"`
	// HistoryBytes bounds the per-stream in-memory history of recent records that recovery
	// sources read before falling back to Kafka (default 64 MiB; items are shared with the
	// materialized copy and the targets' queues).
	HistoryBytes int64 `yaml:"history_bytes"`
	// ShutdownGrace bounds a graceful stop of the gRPC server (default 5s).
	ShutdownGrace time.Duration `yaml:"shutdown_grace"`
}

// LoadConfig reads a YAML file (a Config) and returns it validated. The file is read as
// ParseConfig reads its bytes; errors wrap ErrConfig and name the file.
func LoadConfig(path string) (*Config, error) {
	c := fileDefaults()
	if err := daemon.Load(path, &c, ErrConfig); err != nil {
		return nil, err
	}
	return &c, nil
}

// ParseConfig parses YAML bytes (a Config) and validates the result. listen, http_addr
// and admin.addr default to DefaultListen, DefaultHTTPAddr and DefaultAdminAddr (set them
// to "" to serve nothing there). Unknown
// fields are rejected; ${NAME} in a value is replaced by the environment variable NAME
// after the YAML is parsed (an unset variable is an error naming it and the field; $${ is
// a literal ${; comments are not expanded), as in the distributor's files
// (docs/operations.md).
func ParseConfig(b []byte) (*Config, error) {
	c := fileDefaults()
	if err := daemon.Parse(b, &c, ErrConfig); err != nil {
		return nil, err
	}
	return &c, nil
}

// fileDefaults are the daemon's addresses, which a file starts from.
func fileDefaults() Config {
	return Config{Listen: DefaultListen, HTTPAddr: DefaultHTTPAddr, Admin: AdminConfig{Addr: DefaultAdminAddr}}
}

// Validate fills the defaults and checks the config. Zero values take the documented
// defaults; a negative duration, count or size is refused. Errors wrap ErrConfig and name
// the field by its YAML path (ack_timeout, keepalive.time, stream "s".views); every problem
// is reported at once. New calls it; calling it again changes nothing.
func (c *Config) Validate() error {
	var errs []error
	bad := func(format string, a ...any) { errs = append(errs, fmt.Errorf(format, a...)) }
	for _, err := range []error{
		daemon.Default(&c.MaxBatchEntries, DefaultMaxBatchEntries, "max_batch_entries"),
		daemon.Default(&c.MaxBatchBytes, DefaultMaxBatchBytes, "max_batch_bytes"),
		daemon.Default(&c.TargetBudgetBytes, DefaultTargetBudgetBytes, "target_budget_bytes"),
		daemon.Default(&c.AckTimeout, DefaultAckTimeout, "ack_timeout"),
		daemon.Default(&c.ProgressInterval, DefaultProgressInterval, "progress_interval"),
		daemon.Default(&c.HistoryBytes, DefaultHistoryBytes, "history_bytes"),
		daemon.Default(&c.ShutdownGrace, DefaultShutdownGrace, "shutdown_grace"),
		daemon.Default(&c.StartupTimeout, DefaultStartupTimeout, "startup_timeout"),
		daemon.Default(&c.MaxHelloViews, DefaultMaxHelloViews, "max_hello_views"),
		daemon.Default(&c.MaxHelloBytes, DefaultMaxHelloBytes, "max_hello_bytes"),
		daemon.Default(&c.MaxSnapshotBytes, DefaultMaxSnapshotBytes, "max_snapshot_bytes"),
		daemon.Default(&c.MaxRecordBytes, DefaultMaxRecordBytes, "max_record_bytes"),
		daemon.Default(&c.Keepalive.MinTime, DefaultKeepaliveMinTime, "keepalive.min_time"),
		daemon.Default(&c.Keepalive.Time, DefaultKeepaliveTime, "keepalive.time"),
		daemon.Default(&c.Keepalive.Timeout, DefaultKeepaliveTimeout, "keepalive.timeout"),
		daemon.Default(&c.ReloadInterval, daemon.DefaultReloadInterval, "reload_interval"),
		daemon.Default(&c.MaxConns, DefaultMaxConns, "max_connections"),
		daemon.Default(&c.MaxUnauthenticatedConns, DefaultMaxUnauthenticatedConns, "max_unauthenticated_connections"),
		daemon.Default(&c.AuthTimeout, DefaultAuthTimeout, "auth_timeout"),
		daemon.Default(&c.AuthFailureDelay, DefaultAuthFailureDelay, "auth_failure_delay"),
		daemon.Default(&c.MaxTargetsPerPrincipal, DefaultMaxTargetsPerPrincipal, "max_targets_per_principal"),
		daemon.Default(&c.MaxKafkaRecoveriesPerPrincipal, DefaultMaxKafkaRecoveriesPerPrincipal, "max_kafka_recoveries_per_principal"),
		daemon.Default(&c.MaxServiceLabels, DefaultMaxServiceLabels, "max_service_labels"),
		// 0 reads the topic's delete.retention.ms at start-up
		daemon.Default(&c.DeleteRetention, 0, "delete_retention"),
	} {
		if err != nil {
			errs = append(errs, err)
		}
	}
	if c.MaxStreamsPerConn == 0 {
		c.MaxStreamsPerConn = DefaultMaxStreamsPerConn
	}
	if c.Kafka.ClientID == "" {
		c.Kafka.ClientID = DefaultClientID
	}
	if err := c.Kafka.Validate(); err != nil {
		errs = append(errs, err)
	}
	errs = append(errs, c.checkSecurity()...)
	if len(c.Streams) == 0 {
		bad("streams: at least one stream is required")
	}
	seen := map[string]bool{}
	for i := range c.Streams {
		s := &c.Streams[i]
		if s.Topic == "" {
			s.Topic = s.Name
		}
		switch {
		case s.Name == "":
			bad("streams[%d].name: required", i)
		case seen[s.Name]:
			bad("stream %q: configured twice", s.Name)
		}
		seen[s.Name] = true
		for _, v := range s.Views {
			if _, err := path.Match(v, ""); err != nil || v == "" {
				bad("stream %q.views: bad pattern %q", s.Name, v)
			}
		}
	}
	if c.MaxBatchBytes > 0 && c.TargetBudgetBytes > 0 && c.TargetBudgetBytes < 2*c.MaxBatchBytes {
		bad("target_budget_bytes (%d) must be at least twice max_batch_bytes (%d)", c.TargetBudgetBytes, c.MaxBatchBytes)
	}
	if len(errs) > 0 {
		return fmt.Errorf("%w: %w", ErrConfig, errors.Join(errs...))
	}
	return nil
}

// checkSecurity checks the gRPC server's security settings and the admin endpoint's
// (their files are loaded by New).
func (c *Config) checkSecurity() []error {
	var errs []error
	switch {
	case !c.Insecure && !c.TLS.Enabled():
		errs = append(errs, errors.New("tls.cert_file: required, or insecure: true to serve gRPC in plaintext"))
	case c.Insecure && c.TLS.Enabled():
		errs = append(errs, errors.New("insecure: true and tls: set one of them"))
	}
	if err := c.TLS.server().Check("tls"); err != nil {
		errs = append(errs, err)
	}
	if err := c.Admin.admin().Check("admin"); err != nil {
		errs = append(errs, err)
	}
	return append(errs, c.checkAccess()...)
}

// kafka is the player's Kafka connection: every sarama config of the player is built from
// it, so a connection setting (TLS, SASL, timeout) reaches every client from here.
func (c *Config) kafka() kafkaconn.Config { return c.Kafka }

// Summary is the config as log attributes for the start-up line, without its secrets:
// the addresses, how gRPC is secured (file names, never their contents), where the tokens
// come from, Kafka's brokers, TLS and SASL mechanism and user, and the streams.
func (c *Config) Summary() []any {
	streams := make([]string, len(c.Streams))
	for i, s := range c.Streams {
		topic := s.Topic
		if topic == "" {
			topic = s.Name
		}
		streams[i] = s.Name + " (topic " + topic + ")"
	}
	return []any{
		"listen", c.Listen, "http_addr", c.HTTPAddr, "admin_addr", c.Admin.Addr, "admin_tokens", c.Admin.Tokens.Enabled(),
		"insecure", c.Insecure, "tls_cert_file", c.TLS.CertFile, "client_ca_file", c.TLS.ClientCAFile,
		"tokens_file", c.Tokens.File, "tokens_env", c.Tokens.Env, "access_rules", len(c.Access),
		slog.Group("kafka", c.Kafka.Summary()...), "startup_timeout", c.StartupTimeout.String(), "streams", streams,
	}
}
