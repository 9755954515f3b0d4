package distributor

import (
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/IBM/sarama"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/robfig/cron/v3"
	"go.yaml.in/yaml/v3"

	"github.com/statecast/statecast/internal/daemon"
	"github.com/statecast/statecast/kafkaconn"
	"github.com/statecast/statecast/schemas/record"
)

// Documented defaults (see docs/operations.md).
const (
	DefaultPollInterval      = time.Second
	DefaultDeleteRetention   = 7 * 24 * time.Hour
	DefaultSegment           = time.Hour
	DefaultMinCompactionLag  = 0
	DefaultClientID          = "statecast-distributor"
	DefaultReplicationFactor = 1

	// DefaultOverlap is the overlap of a polled time column (timestamptz, timestamp, date)
	// whose view leaves overlap unset: a transaction that commits up to this long after it
	// wrote its incremental value is still polled. Each poll re-reads the rows written in the
	// last DefaultOverlap; unchanged ones are filtered by their content hash.
	DefaultOverlap = 10 * time.Second
	// DefaultOverlapVersions is the overlap of a polled integer or numeric version column
	// whose view leaves overlap unset: a transaction still commits in time when at most this
	// many versions were taken after its own (about DefaultOverlap at 100 writes/s).
	DefaultOverlapVersions = 1000
	// DefaultRefreshCron is the reconcile schedule of a polled view (one with an incremental
	// column) that leaves refresh_cron unset: a poll never sees a delete, nor a row that
	// stops matching the view's WHERE, nor a change that committed later than the overlap;
	// the next reconcile epoch publishes them.
	DefaultRefreshCron = "@every 10m"
	// RefreshNever as refresh_cron turns the scheduled reconcile off (a polled view then
	// learns of deletes only from Reconcile, POST /reconcile, SIGHUP or a restart).
	RefreshNever            = "never"
	DefaultPositionInterval = 100 * time.Millisecond
	DefaultRereadDebounce   = 500 * time.Millisecond

	// DefaultTransactionalIDPrefix, followed by the topic, is a stream's default
	// transactional id (StreamConfig.TransactionalID).
	DefaultTransactionalIDPrefix = "statecast-distributor-"
	// DefaultTransactionTimeout is kafka.transaction_timeout: below the brokers' default
	// transaction.max.timeout.ms (15 minutes), far above a cycle or a poll, and enough for an
	// epoch of tens of millions of rows in one transaction.
	DefaultTransactionTimeout = 5 * time.Minute
	// DefaultStartupTimeout bounds how long Run retries reaching Kafka at start-up (a
	// broker that starts after the distributor, as in a compose file or a fresh cluster).
	DefaultStartupTimeout = 2 * time.Minute
	// DefaultHealthInterval is how often Run checks that PostgreSQL and Kafka answer, for
	// /readyz.
	DefaultHealthInterval = 5 * time.Second
	// DefaultProgressInterval is how often a long read (a snapshot, a reconcile, the
	// restore from the topic) logs its progress.
	DefaultProgressInterval = 10 * time.Second
)

// Capture modes of a stream.
const (
	// CaptureWAL reads every commit from a logical replication slot (pgoutput): inserts,
	// updates and deletes of the views' base tables, in commit order, with a source
	// position for read-your-writes. The default.
	CaptureWAL = "wal"
	// CapturePoll polls each view's incremental column, for databases where a replication
	// slot is not allowed (a read replica, a managed database without the privilege).
	CapturePoll = "poll"
)

// Replica identity settings of a wal stream (StreamConfig.ReplicaIdentity).
const (
	// ReplicaIdentityFull sets REPLICA IDENTITY FULL on the tables whose changes a view
	// maps through columns outside their replica identity. The default.
	ReplicaIdentityFull = "full"
	// ReplicaIdentityKeep changes no table: such tables' changes re-read the whole view.
	ReplicaIdentityKeep = "keep"
)

// Refresh modes of a view's reconcile epochs.
const (
	ModeReconcile = "reconcile" // publish changed/missing rows, tombstone vanished keys
	ModeRewrite   = "rewrite"   // republish every row, tombstone vanished keys
)

// Config is the distributor configuration (YAML; see LoadConfig).
type Config struct {
	Postgres PostgresConfig `yaml:"postgres"`
	Kafka    KafkaConfig    `yaml:"kafka"`
	// HTTPAddr is the address Run serves the read-only HTTP endpoint on (Handler:
	// /livez, /readyz, /healthz, /metrics). Empty: not served.
	HTTPAddr string `yaml:"http_addr"`
	// StartupTimeout bounds how long Run retries, with backoff, creating and checking the
	// topics when Kafka does not answer yet; then Run fails. Default DefaultStartupTimeout.
	// (PostgreSQL is retried without bound: until it answers, each stream waits as a
	// standby.)
	StartupTimeout time.Duration `yaml:"startup_timeout"`
	// HealthInterval is how often Run checks that PostgreSQL and Kafka answer (/readyz).
	// Default DefaultHealthInterval.
	HealthInterval time.Duration `yaml:"health_interval"`
	// ProgressInterval is how often a long read (a view's snapshot or reconcile, the
	// restore from the topic) logs rows, rows/s, view and phase; a read shorter than it
	// logs nothing. Default DefaultProgressInterval.
	ProgressInterval time.Duration `yaml:"progress_interval"`
	// Admin is the admin HTTP endpoint (AdminHandler: GET /status, POST
	// /reconcile?view=NAME): not served when Admin.Addr is empty; it needs Admin.Tokens
	// unless it listens on a loopback address.
	Admin   AdminConfig    `yaml:"admin"`
	Streams []StreamConfig `yaml:"streams"`
}

// PostgresConfig says how to reach the database.
type PostgresConfig struct {
	// DSN is a pgx connection string, URL or key=value, TLS settings included (required).
	DSN string `yaml:"dsn"`
}

// KafkaConfig says how to reach the broker and how to produce.
type KafkaConfig struct {
	// The connection (brokers, client_id, timeout, tls, sasl) of every Kafka client of the
	// distributor: topic admin, start-up read-back, producer. ClientID defaults to
	// DefaultClientID. A produce request that times out is retried (counted in
	// statecast_distributor_produce_retries_total).
	kafkaconn.Config `yaml:",inline"`
	// Compression of produced batches: lz4 (default), zstd, snappy, gzip or none.
	Compression string `yaml:"compression"`
	// MaxMessageBytes caps a record; 0 means the topic's max.message.bytes.
	MaxMessageBytes int `yaml:"max_message_bytes"`
	// TransactionTimeout is the transaction.timeout.ms of the streams' transactional
	// producers (default DefaultTransactionTimeout). The broker refuses a value above its
	// transaction.max.timeout.ms. A transaction still being fed after half of it (a very
	// large epoch) is committed there and continued in the next one.
	TransactionTimeout time.Duration `yaml:"transaction_timeout"`

	// saramaHook, when set, edits every sarama config the distributor makes (tests: a
	// dialer whose connections can be held).
	saramaHook func(*sarama.Config)
}

// clientConfig is the connection's sarama config, its client id suffixed (admin, restore).
func (k *KafkaConfig) clientConfig(suffix string) *sarama.Config {
	c := k.SaramaConfig()
	c.ClientID += suffix
	if k.saramaHook != nil {
		k.saramaHook(c)
	}
	return c
}

// producerConfig is the connection's idempotent producer config (kafkaconn.ProducerConfig).
func (k *KafkaConfig) producerConfig() *sarama.Config {
	c := k.SaramaProducerConfig()
	if k.saramaHook != nil {
		k.saramaHook(c)
	}
	return c
}

// StreamConfig is one topic and its views.
type StreamConfig struct {
	Topic             string `yaml:"topic"`
	ReplicationFactor int16  `yaml:"replication_factor"` // default 1
	// DeleteRetention is delete.retention.ms: how long tombstones stay readable. It must
	// exceed the worst cache rebuild time (docs/operations.md). Default 7 days.
	DeleteRetention time.Duration `yaml:"delete_retention"`
	// Segment is segment.ms: how often the active segment rolls (compaction only touches
	// closed segments). Default 1h.
	Segment time.Duration `yaml:"segment"`
	// MinCompactionLag is min.compaction.lag.ms. Default 0.
	MinCompactionLag time.Duration `yaml:"min_compaction_lag"`
	// TopicConfigs are extra topic configs set at creation (e.g. min.cleanable.dirty.ratio).
	TopicConfigs map[string]string `yaml:"topic_configs"`
	// Capture is how the stream finds changes: "wal" (default) or "poll".
	Capture string `yaml:"capture"`
	// Slot names the logical replication slot of a wal stream: default statecast_<topic>
	// (lower case, other characters as _), created when missing. The wal streams that name
	// the same slot share it: one walsender decodes the WAL once for all of them (each slot
	// decodes the whole WAL again), and they are active together in one distributor.
	Slot string `yaml:"slot"`
	// Publication names the publication the slot streams (default: the slot's name),
	// created when missing and kept in line with the views' tables. A publication named
	// here is validated but never changed: it must already publish every table. The streams
	// sharing a slot share its publication.
	Publication string `yaml:"publication"`
	// ReplicaIdentity is what a wal stream does when a view maps a table's changes through
	// columns outside the table's replica identity (children grouped by their parent's key,
	// a window's partition, a join column): "full" (default) sets REPLICA IDENTITY FULL on
	// that table at start, so that pgoutput sends the old values (the distributor's role
	// must own the table, as for the publication); "keep" leaves every table as it is, and
	// such a table's changes re-read the whole view (cachectl validate -analyze names them).
	ReplicaIdentity string `yaml:"replica_identity"`
	// ReadSettings are the PostgreSQL settings of the transactions in which a wal stream
	// re-reads the rows that its cycles' changes touched (set_config, local to the
	// transaction; each name must be a setting a session may change). Unset, they are
	// DefaultReadSettings; an empty map keeps the server's. The lookups read a few rows per
	// changed value, mostly from pages in shared buffers: the server's default
	// random_page_cost (4, a spinning disk's) makes the planner scan whole tables into a
	// hash join for a few hundred values, and cost reading them one value at a time
	// (capture.Lookup.Plan) above what it does.
	ReadSettings map[string]string `yaml:"read_settings"`
	// ReadConnections is on up to how many PostgreSQL connections a wal stream's cycle
	// re-reads its views' changed rows, every connection in the cycle's snapshot: the
	// cycle's own, and one more for each 10 ms that the views' reads took in their last
	// cycle (a live cycle's few rows read on its own connection, where the lookups of all
	// its views go to PostgreSQL together in one or two round trips; a cycle of many
	// changes or of costly lookups side by side). Default DefaultReadConnections; 1: the
	// cycle's own only. The distributor's pool grows to hold them unless the DSN sets
	// pool_max_conns.
	ReadConnections int `yaml:"read_connections"`
	// PositionInterval bounds how stale the source position of an idle wal stream gets: a
	// position record is written at least this often while the database's WAL moves
	// (default 100ms).
	PositionInterval time.Duration `yaml:"position_interval"`
	// RereadDebounce: a change of a table a view cannot map to its rows re-reads the whole
	// view, at most once per RereadDebounce (default 500ms), off the stream's path: the
	// view follows the stream at the position of its last re-read meanwhile (position
	// records name it as behind), and the other views do not wait for it.
	RereadDebounce time.Duration `yaml:"reread_debounce"`
	// TransactionalID is the transactional.id of the stream's producer (default
	// DefaultTransactionalIDPrefix + topic). Every distributor of the stream must use the
	// same one: a new active's producer fences the old active's through it (no record of
	// the old active lands after the new active started). Unique per stream.
	TransactionalID string `yaml:"transactional_id"`
	// Defaults are the settings of the stream's views: each view takes every setting it
	// leaves unset (zero; for Overlap: not given) from here, field by field. A view cannot
	// clear an inherited setting: set it per view instead of in Defaults.
	Defaults ViewSettings `yaml:"defaults"`
	Views    []ViewConfig `yaml:"views"`

	// set by Validate: the publication is statecast's own (its name derived)
	managePublication bool
}

// ViewConfig is one named SQL query published into a stream.
type ViewConfig struct {
	Name string `yaml:"name"`
	// SQL is any SELECT (joins allowed). It must not end with a semicolon.
	SQL string `yaml:"sql"`
	// Key lists the key columns in order (composite keys allowed).
	Key []string `yaml:"key"`
	// Tables adds base tables the view reads that PostgreSQL does not see in its SQL (a
	// table read inside a function the view calls): their changes re-read the view. wal only.
	Tables []string `yaml:"tables"`
	// Depends maps a joined table to the view's columns that hold its key, in the order of
	// the table's primary key, when the view does not select the key from that table itself
	// (it selects e.competition_id, equal to competitions.id by the join): a change of the
	// table then re-reads only the rows holding that key instead of the whole view. wal only.
	Depends map[string][]string `yaml:"depends"`
	// ViewSettings are written beside name, sql and key; the unset ones come from the
	// stream's Defaults.
	ViewSettings `yaml:",inline"`
}

// ViewSettings are the settings of a view that its stream's Defaults can give to all its
// views.
type ViewSettings struct {
	// Incremental is the optional column (timestamp or version number) polled for changes.
	Incremental string `yaml:"incremental"`
	// PollInterval between incremental polls (default 1s).
	PollInterval time.Duration `yaml:"poll_interval"`
	// Overlap is subtracted from the watermark: a duration ("5s") for a time column, an
	// integer for a version column. Default: DefaultOverlap for a time column,
	// DefaultOverlapVersions for a version column (resolved when the column's type is
	// known, at the first read).
	Overlap Overlap `yaml:"overlap"`
	// Listen is an optional LISTEN channel: a NOTIFY on it wakes the poll at once.
	Listen string `yaml:"listen"`
	// RefreshCron is a robfig/cron schedule (5 fields or @every/@hourly …) of reconcile
	// epochs, or RefreshNever. Default: DefaultRefreshCron for a view with an incremental
	// column, none for a view without one.
	RefreshCron string `yaml:"refresh_cron"`
	// RefreshMode is "reconcile" (default) or "rewrite".
	RefreshMode string `yaml:"refresh_mode"`
}

// inherit sets every field of v that is zero to d's. It goes over the fields by reflection
// so that a setting added to ViewSettings is inherited without a second edit here.
func (v *ViewSettings) inherit(d *ViewSettings) {
	dst, src := reflect.ValueOf(v).Elem(), reflect.ValueOf(d).Elem()
	for i := range dst.NumField() {
		if dst.Field(i).IsZero() && !src.Field(i).IsZero() {
			dst.Field(i).Set(src.Field(i))
		}
	}
}

// Overlap is a view's overlap window: a duration or a version count.
type Overlap struct {
	Duration time.Duration
	Versions int64
	IsCount  bool
	set      bool
}

// UnmarshalYAML accepts "5s"-style durations and integers.
func (o *Overlap) UnmarshalYAML(n *yaml.Node) error {
	v, err := parseOverlap(n.Value)
	if err != nil {
		return fmt.Errorf("line %d: %w", n.Line, err)
	}
	*o = v
	return nil
}

// OverlapDuration is a time overlap (for timestamp and date columns).
func OverlapDuration(d time.Duration) Overlap { return Overlap{Duration: d, set: true} }

// OverlapVersions is a version-count overlap (for integer and numeric columns).
func OverlapVersions(n int64) Overlap { return Overlap{Versions: n, IsCount: true, set: true} }

func parseOverlap(s string) (Overlap, error) {
	s = strings.TrimSpace(s)
	if i, err := strconv.ParseInt(s, 10, 64); err == nil {
		if i < 0 {
			return Overlap{}, errors.New("overlap must not be negative")
		}
		return OverlapVersions(i), nil
	}
	d, err := time.ParseDuration(s)
	if err != nil || d < 0 {
		return Overlap{}, fmt.Errorf("overlap %q is neither a duration nor a non-negative integer", s)
	}
	return OverlapDuration(d), nil
}

var (
	// Topic names as Kafka allows them.
	topicName = regexp.MustCompile(`^[A-Za-z0-9._-]{1,249}$`)
	identName = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_$]*$`)
)

// LoadConfig reads a YAML file and returns the validated config. The file is read as
// ParseConfig reads its bytes; errors wrap ErrConfig and name the file.
func LoadConfig(path string) (*Config, error) {
	var c Config
	if err := daemon.Load(path, &c, ErrConfig); err != nil {
		return nil, err
	}
	return &c, nil
}

// ParseConfig parses YAML bytes and validates the result. Unknown fields are rejected.
// ${NAME} in a value is replaced by the environment variable NAME after the YAML is
// parsed (an unset variable is an error naming it and the field; $${ is a literal ${;
// comments are not expanded); see docs/operations.md for the rules.
func ParseConfig(b []byte) (*Config, error) {
	var c Config
	if err := daemon.Parse(b, &c, ErrConfig); err != nil {
		return nil, err
	}
	return &c, nil
}

// Validate fills the defaults (documented on each field; a view's unset settings come from
// its stream's Defaults first) and checks the config. A zero value takes the default; a
// negative duration, count or size is refused. Errors wrap ErrConfig and name the field by
// its YAML path, a stream or a view by its name once it has a valid one (stream
// "cache.shop".segment, view "items".key, streams[0].topic); every problem is reported at
// once. New calls it; calling it again changes nothing.
func (c *Config) Validate() error {
	var errs []error
	bad := func(format string, a ...any) { errs = append(errs, fmt.Errorf(format, a...)) }
	if c.Postgres.DSN == "" {
		bad("postgres.dsn: required")
	}
	if c.Kafka.ClientID == "" {
		c.Kafka.ClientID = DefaultClientID
	}
	add := func(err error) {
		if err != nil {
			errs = append(errs, err)
		}
	}
	add(daemon.Default(&c.StartupTimeout, DefaultStartupTimeout, "startup_timeout"))
	add(daemon.Default(&c.HealthInterval, DefaultHealthInterval, "health_interval"))
	add(daemon.Default(&c.ProgressInterval, DefaultProgressInterval, "progress_interval"))
	if err := c.Kafka.Config.Validate(); err != nil {
		errs = append(errs, err)
	}
	if _, ok := compressions[c.Kafka.Compression]; !ok {
		bad("kafka.compression: %q must be lz4, zstd, snappy, gzip or none", c.Kafka.Compression)
	}
	// 0: the topic's max.message.bytes
	add(daemon.Default(&c.Kafka.MaxMessageBytes, 0, "kafka.max_message_bytes"))
	if err := daemon.Default(&c.Kafka.TransactionTimeout, DefaultTransactionTimeout, "kafka.transaction_timeout"); err != nil {
		errs = append(errs, err)
	} else if c.Kafka.TransactionTimeout < time.Second {
		bad("kafka.transaction_timeout: %s is below 1s", c.Kafka.TransactionTimeout)
	}
	if err := c.Admin.admin().Check("admin"); err != nil {
		errs = append(errs, err)
	}
	if len(c.Streams) == 0 {
		bad("streams: at least one stream is required")
	}
	topics := map[string]bool{}
	txnIDs := map[string]string{}
	views := map[string]string{}
	for i := range c.Streams {
		s := &c.Streams[i]
		where := fmt.Sprintf("streams[%d]", i)
		if !topicName.MatchString(s.Topic) {
			bad("%s.topic: %q is not a valid topic name", where, s.Topic)
		} else {
			where = fmt.Sprintf("stream %q", s.Topic)
		}
		if topics[s.Topic] {
			bad("%s: topic configured twice", where)
		}
		topics[s.Topic] = true
		if s.TransactionalID == "" {
			s.TransactionalID = DefaultTransactionalIDPrefix + s.Topic
		}
		if o, dup := txnIDs[s.TransactionalID]; dup {
			bad("%s.transactional_id: %q is stream %q's too; each stream needs its own", where, s.TransactionalID, o)
		}
		txnIDs[s.TransactionalID] = s.Topic
		add(daemon.Default(&s.ReplicationFactor, DefaultReplicationFactor, where+".replication_factor"))
		add(daemon.Default(&s.DeleteRetention, DefaultDeleteRetention, where+".delete_retention"))
		add(daemon.Default(&s.Segment, DefaultSegment, where+".segment"))
		add(daemon.Default(&s.MinCompactionLag, DefaultMinCompactionLag, where+".min_compaction_lag"))
		for k := range s.TopicConfigs {
			switch k {
			case "cleanup.policy", "delete.retention.ms", "segment.ms", "min.compaction.lag.ms":
				bad("%s.topic_configs: %s is set by its own field (or fixed)", where, k)
			}
		}
		if len(s.Views) == 0 {
			bad("%s.views: at least one view is required", where)
		}
		s.checkCapture(where, bad)
		s.Defaults.check(where+".defaults", bad)
		for j := range s.Views {
			v := &s.Views[j]
			vw := fmt.Sprintf("%s.views[%d]", where, j)
			if !record.ValidViewName(v.Name) {
				bad("%s.name: %q must match [A-Za-z_][A-Za-z0-9_.-]*", vw, v.Name)
			} else {
				vw = fmt.Sprintf("view %q", v.Name)
				if t, dup := views[v.Name]; dup {
					bad("%s: name already used in stream %q", vw, t)
				}
				views[v.Name] = s.Topic
			}
			if sql := strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v.SQL), ";")); sql != v.SQL {
				v.SQL = sql
			}
			if v.SQL == "" {
				bad("%s.sql: required", vw)
			}
			if len(v.Key) == 0 {
				bad("%s.key: at least one key column is required", vw)
			}
			seen := map[string]bool{}
			for _, k := range v.Key {
				if k == "" || seen[k] {
					bad("%s.key: empty or repeated column %q", vw, k)
				}
				seen[k] = true
			}
			// each value is checked where it is written: a bad default is reported once
			v.check(vw, bad)
			v.checkCapture(s.Capture, vw, bad)
			v.inherit(&s.Defaults)
			if v.Incremental == "" && (v.Overlap.set || v.Listen != "") {
				bad("%s: overlap and listen need an incremental column", vw)
			}
			if v.PollInterval == 0 && s.Capture == CapturePoll {
				v.PollInterval = DefaultPollInterval
			}
			if v.RefreshMode == "" {
				v.RefreshMode = ModeReconcile
			}
			if v.RefreshCron == "" && v.polled() {
				v.RefreshCron = DefaultRefreshCron
			}
		}
	}
	pubOf := map[string]*StreamConfig{}
	for i := range c.Streams {
		s := &c.Streams[i]
		if s.Capture != CaptureWAL {
			continue
		}
		if o := pubOf[s.Slot]; o != nil && (o.Publication != s.Publication || o.managePublication != s.managePublication) {
			bad("stream %q: shares slot %s with stream %q but names another publication (%q, %q)", s.Topic, s.Slot, o.Topic, s.Publication, o.Publication)
		}
		pubOf[s.Slot] = s
	}
	if len(errs) > 0 {
		return fmt.Errorf("%w: %w", ErrConfig, errors.Join(errs...))
	}
	return nil
}

// check reports the problems of the settings themselves; where names them.
func (v *ViewSettings) check(where string, bad func(string, ...any)) {
	if v.Incremental != "" && strings.ContainsAny(v.Incremental, "\"\x00") {
		bad("%s.incremental: invalid column name %q", where, v.Incremental)
	}
	if v.PollInterval < 0 {
		bad("%s.poll_interval: %v is negative (0 takes the default)", where, v.PollInterval)
	}
	if v.Overlap.Duration < 0 || v.Overlap.Versions < 0 {
		bad("%s.overlap: must not be negative", where)
	}
	if v.Listen != "" && !identName.MatchString(v.Listen) {
		bad("%s.listen: %q is not a plain identifier", where, v.Listen)
	}
	if v.RefreshCron != "" && v.RefreshCron != RefreshNever {
		if _, err := cron.ParseStandard(v.RefreshCron); err != nil {
			bad("%s.refresh_cron: %q: %v", where, v.RefreshCron, err)
		}
	}
	switch v.RefreshMode {
	case "", ModeReconcile, ModeRewrite:
	default:
		bad("%s.refresh_mode: %q must be %q or %q", where, v.RefreshMode, ModeReconcile, ModeRewrite)
	}
}

// polled reports whether the view is published by incremental polls between its epochs.
func (v *ViewSettings) polled() bool { return v.Incremental != "" }

// schedule returns the view's reconcile schedule ("" = none).
func (v *ViewSettings) schedule() string {
	if v.RefreshCron == RefreshNever {
		return ""
	}
	return v.RefreshCron
}

// overlapFor returns the view's overlap for a column that is time-like or not: the
// configured one, or the type's default when overlap was left unset.
func (v *ViewSettings) overlapFor(isTime bool) Overlap {
	switch {
	case v.Overlap != (Overlap{}):
		return v.Overlap
	case isTime:
		return OverlapDuration(DefaultOverlap)
	default:
		return OverlapVersions(DefaultOverlapVersions)
	}
}

// clone returns a copy of c that shares no memory with it (New validates and keeps its own).
func (c Config) clone() Config {
	c.Kafka.Brokers = slices.Clone(c.Kafka.Brokers)
	c.Streams = slices.Clone(c.Streams)
	for i := range c.Streams {
		s := &c.Streams[i]
		s.TopicConfigs = maps.Clone(s.TopicConfigs)
		s.Views = slices.Clone(s.Views)
		for j := range s.Views {
			v := &s.Views[j]
			v.Key = slices.Clone(v.Key)
			v.Tables = slices.Clone(v.Tables)
			v.Depends = maps.Clone(v.Depends)
		}
	}
	return c
}

// view returns the config of the named view and its stream.
func (c *Config) view(name string) (*StreamConfig, *ViewConfig) {
	for i := range c.Streams {
		for j := range c.Streams[i].Views {
			if c.Streams[i].Views[j].Name == name {
				return &c.Streams[i], &c.Streams[i].Views[j]
			}
		}
	}
	return nil, nil
}

var compressions = map[string]sarama.CompressionCodec{
	"": sarama.CompressionLZ4, "lz4": sarama.CompressionLZ4, "zstd": sarama.CompressionZSTD,
	"snappy": sarama.CompressionSnappy, "gzip": sarama.CompressionGZIP, "none": sarama.CompressionNone,
}

// Summary is the config as log attributes for the start-up line, without its secrets:
// PostgreSQL's host, port, database and user (never the password or the DSN itself),
// Kafka's brokers, TLS and SASL mechanism and user, the endpoints, and each stream's
// capture mode and views.
func (c *Config) Summary() []any {
	pg := []any{}
	if pc, err := pgconn.ParseConfig(c.Postgres.DSN); err == nil {
		pg = append(pg, "host", pc.Host, "port", pc.Port, "database", pc.Database, "user", pc.User, "tls", pc.TLSConfig != nil)
	} else {
		pg = append(pg, "dsn", "unparsable")
	}
	streams := make([]string, 0, len(c.Streams))
	for _, s := range c.Streams {
		views := make([]string, len(s.Views))
		for i, v := range s.Views {
			views[i] = v.Name
		}
		capture := s.Capture
		if capture == "" {
			capture = CaptureWAL
		}
		streams = append(streams, fmt.Sprintf("%s (%s: %s)", s.Topic, capture, strings.Join(views, ", ")))
	}
	return []any{
		slog.Group("postgres", pg...),
		slog.Group("kafka", c.Kafka.Summary()...),
		"http_addr", c.HTTPAddr, "admin_addr", c.Admin.Addr, "admin_tokens", c.Admin.Tokens.Enabled(),
		"startup_timeout", c.StartupTimeout.String(), "streams", streams,
	}
}
