package bench

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	gojson "github.com/goccy/go-json"
	"github.com/jackc/pgx/v5"

	"github.com/statecast/statecast/cacheclient"
	"github.com/statecast/statecast/distributor"
	"github.com/statecast/statecast/kafkaconn"
)

// Pipeline is the WAL capture path under test, in this process: a distributor with one
// stream captured from the WAL (capture: wal, the default) and a player serving its
// topic. A Cache subscribes to it.
type Pipeline struct {
	Topic  string
	Dist   *Distributor
	Player *Player

	env   *DistEnv
	slots []string // the slots the distributor created
}

// StreamTuning, when set, adjusts the stream of every pipeline StartPipeline starts (a
// benchmark's flags).
var StreamTuning func(*distributor.StreamConfig)

// StartPipeline starts a distributor publishing views into a fresh topic of env, connected
// to PostgreSQL with dsn (env.DSN, or through a Gate), and a player serving the topic;
// it returns once both are ready (every view's first snapshot published).
// opts are the distributor's (a logger).
func StartPipeline(ctx context.Context, env *DistEnv, dsn string, views []distributor.ViewConfig, opts ...distributor.Option) (*Pipeline, error) {
	before, err := Slots(ctx, env.Conn, env.DB())
	if err != nil {
		return nil, err
	}
	p := &Pipeline{Topic: env.Topic("bench_wal"), env: env}
	cfg := distributor.Config{
		Postgres: distributor.PostgresConfig{DSN: dsn},
		Kafka:    distributor.KafkaConfig{Config: kafkaconn.Config{Brokers: env.Brokers, ClientID: clientID}},
		Streams:  []distributor.StreamConfig{{Topic: p.Topic, Capture: distributor.CaptureWAL, Views: views}},
	}
	if StreamTuning != nil {
		StreamTuning(&cfg.Streams[0])
	}
	p.Dist, _, err = StartDistributor(ctx, cfg, opts...)
	if err != nil {
		_ = p.Close()
		return nil, err
	}
	after, err := Slots(ctx, env.Conn, env.DB())
	if err != nil {
		_ = p.Close()
		return nil, err
	}
	for _, s := range after {
		if !slices.Contains(before, s) {
			p.slots = append(p.slots, s)
		}
	}
	if p.Player, err = StartPlayer(env.Brokers, p.Topic, nil); err != nil {
		_ = p.Close()
		return nil, err
	}
	return p, nil
}

// Slot is the name of the distributor's replication slot.
func (p *Pipeline) Slot() string {
	if len(p.slots) == 0 {
		return ""
	}
	return p.slots[0]
}

// Dependencies are the distributor's account of how each view's tables reach its rows
// (mapped by key, or re-read whole), "view: line".
func (p *Pipeline) Dependencies() []string {
	var out []string
	for _, s := range p.Dist.D.Status() {
		for _, v := range s.Views {
			for _, d := range v.Dependencies {
				out = append(out, v.Name+": "+d)
			}
		}
	}
	return out
}

// SentLSN is how far the server has decoded the WAL for the distributor's slot (its
// walsender's sent_lsn), and the WAL's current write position.
func (p *Pipeline) SentLSN(ctx context.Context) (sent, current uint64, err error) {
	err = p.env.Conn.QueryRow(ctx, `SELECT coalesce((SELECT r.sent_lsn - '0/0' FROM pg_stat_replication r
		JOIN pg_replication_slots s ON s.active_pid = r.pid WHERE s.slot_name = $1), 0)::bigint,
		(pg_current_wal_lsn() - '0/0')::bigint`, p.Slot()).Scan(&sent, &current)
	return sent, current, err
}

// Close stops the player and the distributor and drops the distributor's slot.
func (p *Pipeline) Close() error {
	if p.Player != nil {
		p.Player.Close()
	}
	var err error
	if p.Dist != nil {
		if e := p.Dist.Stop(); e != nil && !errors.Is(e, context.Canceled) {
			err = e
		}
	}
	for _, s := range p.slots {
		err = errors.Join(err, DropSlot(context.Background(), p.env.Conn, s))
	}
	return err
}

// Cache is a cacheclient of a stream, in this process, whose views hold one version (an
// int64) per row, each view watched by a Probe.
type Cache struct {
	Client *cacheclient.Client
	views  map[string]*cacheclient.View[int64]
	probes map[string]*Probe
}

// StartCache starts a cacheclient of stream at the player addr with a view per decoder
// and returns once it is ready.
func StartCache(ctx context.Context, addr, stream string, decoders map[string]cacheclient.Decoder[int64]) (*Cache, error) {
	c := &Cache{views: map[string]*cacheclient.View[int64]{}, probes: map[string]*Probe{}}
	notify := func() {
		for _, p := range c.probes {
			p.Notify()
		}
	}
	cli, err := cacheclient.New(cacheclient.Config{Addresses: []string{addr}, Stream: stream, Service: "cachebench"},
		cacheclient.WithHooks(cacheclient.Hooks{
			OnBatchApplied: func(int, int64, time.Duration) { notify() },
			OnSnapshot:     func(int64, int) { notify() },
		}))
	if err != nil {
		return nil, err
	}
	c.Client = cli
	for name, dec := range decoders {
		v, err := cacheclient.Register(cli, name, dec)
		if err != nil {
			return nil, err
		}
		c.views[name] = v
		c.probes[name] = NewProbe(func(key string) (int64, bool) { return v.Get(key) })
	}
	if err := cli.Start(); err != nil {
		c.Close()
		return nil, err
	}
	wctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	if err := cli.WaitReady(wctx); err != nil {
		c.Close()
		return nil, fmt.Errorf("bench: cache not ready: %w", err)
	}
	return c, nil
}

// View returns the view name.
func (c *Cache) View(name string) *cacheclient.View[int64] { return c.views[name] }

// Probe returns the probe of view name.
func (c *Cache) Probe(name string) *Probe { return c.probes[name] }

// Close closes the client and the probes.
func (c *Cache) Close() {
	if c.Client != nil {
		_ = c.Client.Close()
	}
	for _, p := range c.probes {
		p.Close()
	}
}

// VersionDecoder decodes a Workload row into its version (the column v).
func VersionDecoder(_ string, value []byte) (int64, error) {
	var row struct {
		V *int64 `json:"v"`
	}
	if err := gojson.Unmarshal(value, &row); err != nil {
		return 0, err
	}
	if row.V == nil {
		return 0, errors.New("bench: row without a version (column v)")
	}
	return *row.V, nil
}

// Publication creates a publication of tables for a floor's slot.
func Publication(ctx context.Context, conn *pgx.Conn, name string, tables ...string) error {
	_, err := conn.Exec(ctx, "CREATE PUBLICATION "+name+" FOR TABLE "+joinIdents(tables))
	return err
}

func joinIdents(ts []string) string {
	out := ""
	for i, t := range ts {
		if i > 0 {
			out += ", "
		}
		out += pgx.Identifier{t}.Sanitize()
	}
	return out
}
