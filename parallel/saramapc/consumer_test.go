package saramapc

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/IBM/sarama"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/statecast/statecast/internal/testenv"
	"github.com/statecast/statecast/kafkaconn"
	"github.com/statecast/statecast/parallel"
)

func TestConfigValidation(t *testing.T) {
	h := func(context.Context, parallel.Record[Message]) error { return nil }
	if _, err := New(Config{}); !errors.Is(err, ErrConfig) {
		t.Fatalf("empty config: %v, want ErrConfig", err)
	}
	cfg := Config{Brokers: []string{"x"}, Group: "g", Topics: []string{"t"}, Engine: parallel.Config[Message]{Handler: h}}
	c, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if c.cfg.Sarama == nil || c.cfg.Sarama.ClientID != DefaultClientID || c.cfg.Sarama.Consumer.Offsets.AutoCommit.Enable ||
		c.cfg.CommitInterval != time.Second || c.cfg.RevokeTimeout != 10*time.Second || c.cfg.DrainTimeout != 30*time.Second {
		t.Errorf("defaults: %+v", c.cfg)
	}
	if c.cfg.Engine.Logger != c.log || c.log == nil {
		t.Errorf("the engines do not log to the consumer's logger")
	}
	reg := prometheus.NewRegistry()
	if _, err := New(cfg, WithRegisterer(reg)); err != nil {
		t.Fatal(err)
	}
	if _, err := New(cfg, WithRegisterer(reg)); !errors.Is(err, ErrConfig) {
		t.Errorf("second registration in one registry: %v, want ErrConfig", err)
	}
}

// TestConfigErrors: a bad value, a negative duration or size included (Engine's too), fails
// Validate with ErrConfig naming the field by its Go path; zero takes the default.
func TestConfigErrors(t *testing.T) {
	h := func(context.Context, parallel.Record[Message]) error { return nil }
	for _, tc := range []struct {
		name string
		edit func(*Config)
		want string
	}{
		{"no brokers", func(c *Config) { c.Brokers = nil }, "Brokers: required"},
		{"no group", func(c *Config) { c.Group = "" }, "Group: required"},
		{"no topics", func(c *Config) { c.Topics = nil }, "Topics: required"},
		{"no handler", func(c *Config) { c.Engine.Handler = nil }, "Engine.Handler: required"},
		{"bad commit mode", func(c *Config) { c.Commit = 9 }, "Commit: unknown"},
		{"bad isolation", func(c *Config) { c.IsolationLevel = 9 }, "IsolationLevel: unknown"},
		{"dead letters without FailSkip", func(c *Config) { c.DeadLetterTopic = "dl" }, "DeadLetterTopic: needs Engine.OnFailure FailSkip"},
		{"negative CommitInterval", func(c *Config) { c.CommitInterval = -time.Second }, "CommitInterval: -1s is negative"},
		{"negative RevokeTimeout", func(c *Config) { c.RevokeTimeout = -time.Second }, "RevokeTimeout: -1s is negative"},
		{"negative DrainTimeout", func(c *Config) { c.DrainTimeout = -time.Second }, "DrainTimeout: -1s is negative"},
		{"negative MaxPendingBytes", func(c *Config) { c.MaxPendingBytes = -1 }, "MaxPendingBytes: -1 is negative"},
		{"negative Engine.MaxAttempts", func(c *Config) { c.Engine.MaxAttempts = -1 }, "Engine: parallel: invalid config: MaxAttempts: -1 is negative"},
		{"negative Engine.MaxConcurrency", func(c *Config) { c.Engine.MaxConcurrency = -1 }, "Engine: parallel: invalid config: MaxConcurrency: -1 is negative"},
		{"negative Kafka.Timeout", func(c *Config) { c.Kafka.Timeout = -time.Second }, "kafka.timeout: -1s is negative"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := Config{Brokers: []string{"x"}, Group: "g", Topics: []string{"t"}, Engine: parallel.Config[Message]{Handler: h}}
			tc.edit(&c)
			if err := c.Validate(); !errors.Is(err, ErrConfig) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Validate = %v, want ErrConfig containing %q", err, tc.want)
			}
		})
	}
	c := Config{Brokers: []string{"x"}, Group: "g", Topics: []string{"t"}, Engine: parallel.Config[Message]{Handler: h}}
	if err := c.Validate(); err != nil || c.CommitInterval != time.Second || c.MaxPendingBytes != DefaultMaxPendingBytes ||
		c.Engine.MaxAttempts != parallel.DefaultMaxAttempts {
		t.Fatalf("zero values: %v, %+v", err, c)
	}
}

// TestMetrics: WithRegisterer exports the engines' stats, one series per claimed partition.
func TestMetrics(t *testing.T) {
	brokers := testenv.KafkaBrokers(t)
	topic := testenv.NewTopic(t, "pc_metrics", nil)
	produce(t, brokers, topic, keyed(20, 4, "v")...)
	var done atomic.Int64
	cfg := testConfig(brokers, testenv.UniqueName("g"), topic, func(ctx context.Context, r parallel.Record[Message]) error {
		done.Add(1)
		return nil
	})
	reg := prometheus.NewRegistry()
	start(t, cfg, WithRegisterer(reg))
	name := "statecast_parallel_completed_total"
	deadline := time.Now().Add(60 * time.Second)
	for {
		mfs, err := reg.Gather()
		if err != nil {
			t.Fatal(err)
		}
		for _, mf := range mfs {
			if mf.GetName() != name {
				continue
			}
			for _, m := range mf.GetMetric() {
				if m.GetCounter().GetValue() == 20 && len(m.GetLabel()) == 1 && m.GetLabel()[0].GetValue() == topic+"/0" {
					return
				}
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s{engine=%q} never reached 20 (handled %d): %v", name, topic+"/0", done.Load(), mfs)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestStopRestartNoReprocessing: a stuck record holds the watermark; every other record
// completes and is committed in the metadata; after a restart only the stuck one runs again.
func TestStopRestartNoReprocessing(t *testing.T) {
	brokers := testenv.KafkaBrokers(t)
	topic := testenv.NewTopic(t, "pc_restart", nil)
	group := testenv.UniqueName("g")
	offs := produce(t, brokers, topic, keyed(60, 6, "v")...)
	stuckOff := offs[3] // key k3
	rec1 := newRecorder()
	cfg := testConfig(brokers, group, topic, func(ctx context.Context, r parallel.Record[Message]) error {
		if r.Offset == stuckOff {
			<-ctx.Done() // "crashes" before finishing
			return ctx.Err()
		}
		rec1.add(r.Value)
		return nil
	})
	cfg.RevokeTimeout = 200 * time.Millisecond
	_, stop := start(t, cfg)
	cl := newClient(t, brokers)
	// Everything but key k3 from the stuck record on completes (k3's later records wait).
	waitCommitted(t, cl, group, topic, "completed set", func(cp parallel.Checkpoint) bool {
		if cp.Watermark != stuckOff {
			return false
		}
		for i, o := range offs {
			if i%6 != 3 && !cp.Contains(o) {
				return false
			}
		}
		return true
	})
	if err := stop(); err != nil {
		t.Fatal(err)
	}

	rec2 := newRecorder()
	cfg2 := testConfig(brokers, group, topic, func(_ context.Context, r parallel.Record[Message]) error {
		rec2.add(r.Value)
		return nil
	})
	_, stop2 := start(t, cfg2)
	last := offs[len(offs)-1]
	waitCommitted(t, cl, group, topic, "watermark at end", func(cp parallel.Checkpoint) bool { return cp.Watermark == last+1 })
	if err := stop2(); err != nil {
		t.Fatal(err)
	}
	got := rec2.processed()
	for i, o := range offs {
		want := 0
		if i%6 == 3 {
			want = 1 // the stuck record and the k3 records queued behind it
		}
		if got[o] != want {
			t.Errorf("resumable: offset %d (key k%d) processed %d times after restart, want %d", o, i%6, got[o], want)
		}
	}
	rec2.checkKeyOrder(t)
}

// TestGapsTransactionalAndCompacted: transaction markers and compaction leave holes in the
// offsets; the watermark moves across them and nothing is lost or repeated.
func TestGapsTransactionalAndCompacted(t *testing.T) {
	brokers := testenv.KafkaBrokers(t)
	topic := testenv.NewTopic(t, "pc_gaps", map[string]string{
		"cleanup.policy":            "compact",
		"segment.ms":                "100",
		"min.cleanable.dirty.ratio": "0.01",
		"min.compaction.lag.ms":     "0",
		"delete.retention.ms":       "100",
	})
	pc := kafkaconn.ProducerConfig("saramapc-txn")
	pc.Producer.Transaction.ID = testenv.UniqueName("txn")
	p, err := sarama.NewSyncProducer(brokers, pc)
	if err != nil {
		t.Fatal(err)
	}
	// Duplicate keys across transactions: compaction removes the older versions.
	for txn := range 5 {
		if err := p.BeginTxn(); err != nil {
			t.Fatal(err)
		}
		for i := range 10 {
			key := fmt.Sprintf("t%d_%d", txn, i)
			if i%3 == 0 {
				key = fmt.Sprintf("dup%d", i) // rewritten by every transaction
			}
			_, _, err := p.SendMessage(&sarama.ProducerMessage{Topic: topic, Key: sarama.StringEncoder(key), Value: sarama.StringEncoder(fmt.Sprintf("t%d", txn))})
			if err != nil {
				t.Fatal(err)
			}
		}
		if err := p.CommitTxn(); err != nil {
			t.Fatal(err)
		}
		time.Sleep(150 * time.Millisecond) // let segment.ms roll segments so the cleaner has work
	}
	_ = p.Close()
	// Trigger rolling of the last segment and wait for compaction to remove old versions.
	produce(t, brokers, topic, "roll", "x")
	time.Sleep(200 * time.Millisecond)
	produce(t, brokers, topic, "roll", "y")
	cl := newClient(t, brokers)
	offsets := func() []int64 {
		c, err := sarama.NewConsumerFromClient(cl)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		hwm, _ := cl.GetOffset(topic, 0, sarama.OffsetNewest)
		pcns, err := c.ConsumePartition(topic, 0, sarama.OffsetOldest)
		if err != nil {
			t.Fatal(err)
		}
		defer pcns.Close()
		var offs []int64
		for {
			select {
			case m := <-pcns.Messages():
				offs = append(offs, m.Offset)
				if m.Offset >= hwm-1 {
					return offs
				}
			case <-time.After(10 * time.Second):
				t.Fatalf("reading back: %v (hwm %d)", offs, hwm)
			}
		}
	}
	var present []int64
	waitUntil(t, "compaction", func() bool {
		present = offsets()
		return len(present) < 52 // 50 transactional + 2 roll records before compaction
	})
	gaps := 0
	for i := 1; i < len(present); i++ {
		if present[i] != present[i-1]+1 {
			gaps++
		}
	}
	if gaps < 3 {
		t.Fatalf("no gaps in %v", present)
	}

	group := testenv.UniqueName("g")
	rec := newRecorder()
	cfg := testConfig(brokers, group, topic, func(_ context.Context, r parallel.Record[Message]) error {
		time.Sleep(time.Duration(r.Offset%3) * time.Millisecond)
		rec.add(r.Value)
		return nil
	})
	_, stop := start(t, cfg)
	last := present[len(present)-1]
	waitCommitted(t, cl, group, topic, "watermark past the last record", func(cp parallel.Checkpoint) bool {
		return cp.Watermark == last+1 && len(cp.Completed) == 0
	})
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	// Compaction may go on while the consumer reads: every record still in the log must
	// have been processed, none twice.
	got := rec.processed()
	for o, n := range got {
		if n != 1 {
			t.Errorf("unique: offset %d processed %d times", o, n)
		}
	}
	for _, o := range offsets() {
		if got[o] != 1 {
			t.Errorf("reliable: offset %d processed %d times", o, got[o])
		}
	}
	t.Logf("%d records, %d gaps, offsets %v", len(present), gaps, present)
	rec.checkKeyOrder(t)
}

// TestPoisonToDeadLetter: a record that always fails reaches the dead-letter callback while
// the other keys — and later records of its own key — continue.
func TestPoisonToDeadLetter(t *testing.T) {
	brokers := testenv.KafkaBrokers(t)
	topic := testenv.NewTopic(t, "pc_poison", nil)
	group := testenv.UniqueName("g")
	kvs := keyed(40, 4, "v")
	kvs[2*5+1] = "poison" // offset 5, key k1
	offs := produce(t, brokers, topic, kvs...)
	rec := newRecorder()
	dlq := make(chan Message, 10)
	cfg := testConfig(brokers, group, topic, func(_ context.Context, r parallel.Record[Message]) error {
		if string(r.Value.Value) == "poison" {
			return errors.New("cannot process")
		}
		rec.add(r.Value)
		return nil
	})
	cfg.Engine.MaxAttempts = 3
	cfg.Engine.Backoff = parallel.ExponentialBackoff(time.Millisecond, 10*time.Millisecond)
	cfg.Engine.OnFailure = parallel.FailSkip
	cfg.Engine.DeadLetter = func(_ context.Context, r parallel.Record[Message], err error) { dlq <- r.Value }
	_, stop := start(t, cfg)
	cl := newClient(t, brokers)
	waitCommitted(t, cl, group, topic, "end", func(cp parallel.Checkpoint) bool { return cp.Watermark == offs[len(offs)-1]+1 })
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	select {
	case m := <-dlq:
		if m.Offset != offs[5] {
			t.Fatalf("dead letter at %d, want %d", m.Offset, offs[5])
		}
	default:
		t.Fatal("no dead letter")
	}
	if len(dlq) != 0 {
		t.Fatal("more than one dead letter")
	}
	if got := rec.processed(); len(got) != 39 {
		t.Fatalf("processed %d records, want 39", len(got))
	}
	rec.checkKeyOrder(t)
}

// TestFailStopEndsRun: under FailStop the consumer stops with the RecordError and commits
// the watermark below the failed record.
func TestFailStopEndsRun(t *testing.T) {
	brokers := testenv.KafkaBrokers(t)
	topic := testenv.NewTopic(t, "pc_stop", nil)
	group := testenv.UniqueName("g")
	offs := produce(t, brokers, topic, keyed(20, 2, "v")...)
	cfg := testConfig(brokers, group, topic, func(_ context.Context, r parallel.Record[Message]) error {
		if r.Offset == offs[7] {
			return errors.New("fatal")
		}
		return nil
	})
	cfg.Engine.MaxAttempts = 1
	c, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	err = c.Run(context.Background())
	var re *parallel.RecordError
	if !errors.As(err, &re) || re.Offset != offs[7] {
		t.Fatalf("Run: %v", err)
	}
	// Records of the other key before offs[7] may or may not have run when the failure
	// stopped the engine; what must hold is that the failed record is never committed as
	// complete, and that a restart would read it again.
	cp, err := FetchCheckpoint(newClient(t, brokers), group, topic, 0)
	if err != nil {
		t.Fatal(err)
	}
	if cp.Contains(offs[7]) || cp.Watermark > offs[7] {
		t.Fatalf("committed %+v: the failed offset %d is committed as complete", cp, offs[7])
	}
	// offs[1], offs[3], offs[5] share offs[7]'s key: they completed before it ran, and the
	// stop commits what completed.
	for _, i := range []int{1, 3, 5} {
		if !cp.Contains(offs[i]) {
			t.Fatalf("committed %+v: offset %d of the failed record's key, completed before it, is not", cp, offs[i])
		}
	}
}

// TestOffsetOutOfRange: a committed offset past the end of the log is reset per
// Consumer.Offsets.Initial (oldest here) instead of failing, and its metadata is ignored.
func TestOffsetOutOfRange(t *testing.T) {
	brokers := testenv.KafkaBrokers(t)
	topic := testenv.NewTopic(t, "pc_oor", nil)
	group := testenv.UniqueName("g")
	offs := produce(t, brokers, topic, keyed(10, 3, "v")...)
	cl := newClient(t, brokers)
	bogus := parallel.Checkpoint{Watermark: 1000, Completed: []parallel.Range{{From: 1002, To: 1003}}}
	if err := CommitProgress(cl, group, topic, 0, parallel.Progress{Watermark: 1000, Metadata: bogus.Encode(0)}); err != nil {
		t.Fatal(err)
	}
	rec := newRecorder()
	cfg := testConfig(brokers, group, topic, func(_ context.Context, r parallel.Record[Message]) error {
		rec.add(r.Value)
		return nil
	})
	_, stop := start(t, cfg)
	waitCommitted(t, cl, group, topic, "reset and processed", func(cp parallel.Checkpoint) bool { return cp.Watermark == offs[len(offs)-1]+1 })
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	if got := rec.processed(); len(got) != len(offs) {
		t.Fatalf("processed %d of %d", len(got), len(offs))
	}
}

// TestStuckKeyBoundedMemory: with one key stuck, intake stops at the engine's buffer bound
// while the other keys complete; releasing the key finishes everything.
func TestStuckKeyBoundedMemory(t *testing.T) {
	brokers := testenv.KafkaBrokers(t)
	topic := testenv.NewTopic(t, "pc_stuck", nil)
	group := testenv.UniqueName("g")
	var kvs []string
	for i := range 500 {
		k := fmt.Sprint("k", i)
		if i%100 == 0 {
			k = "stuck"
		}
		kvs = append(kvs, k, "v")
	}
	offs := produce(t, brokers, topic, kvs...)
	release := make(chan struct{})
	var done atomic.Int64
	const bound = 50
	cfg := testConfig(brokers, group, topic, func(ctx context.Context, r parallel.Record[Message]) error {
		if string(r.Key) == "stuck" {
			select {
			case <-release:
			case <-ctx.Done():
				return ctx.Err()
			}
		}
		done.Add(1)
		return nil
	})
	cfg.Engine.MaxBufferedRecords = bound
	c, stop := start(t, cfg)
	waitUntil(t, "intake paused at the bound", func() bool {
		for _, s := range c.Stats() {
			return done.Load() == bound-1 && s.Watermark == offs[0]
		}
		return false
	})
	for _, s := range c.Stats() {
		if s.InFlight+s.Queued > bound {
			t.Fatalf("stats %+v exceed bound %d", s, bound)
		}
	}
	close(release)
	cl := newClient(t, brokers)
	waitCommitted(t, cl, group, topic, "end", func(cp parallel.Checkpoint) bool { return cp.Watermark == offs[len(offs)-1]+1 })
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	if done.Load() != int64(len(offs)) {
		t.Fatalf("processed %d of %d", done.Load(), len(offs))
	}
}

// TestOffsetBelowLogStart: records up to offset 6 are deleted after the group committed 2;
// the consumer resets to the log start (oldest) instead of failing, and ignores the metadata.
func TestOffsetBelowLogStart(t *testing.T) {
	brokers := testenv.KafkaBrokers(t)
	topic := testenv.NewTopic(t, "pc_below", nil)
	group := testenv.UniqueName("g")
	offs := produce(t, brokers, topic, keyed(10, 3, "v")...)
	cl := newClient(t, brokers)
	old := parallel.Checkpoint{Watermark: offs[2], Completed: []parallel.Range{{From: offs[4], To: offs[4] + 1}}}
	if err := CommitProgress(cl, group, topic, 0, parallel.Progress{Watermark: old.Watermark, Metadata: old.Encode(0)}); err != nil {
		t.Fatal(err)
	}
	admin, err := sarama.NewClusterAdminFromClient(cl)
	if err != nil {
		t.Fatal(err)
	}
	if err := admin.DeleteRecords(topic, map[int32]int64{0: offs[6]}); err != nil {
		t.Fatal(err)
	}
	rec := newRecorder()
	cfg := testConfig(brokers, group, topic, func(_ context.Context, r parallel.Record[Message]) error {
		rec.add(r.Value)
		return nil
	})
	_, stop := start(t, cfg)
	waitCommitted(t, cl, group, topic, "end", func(cp parallel.Checkpoint) bool { return cp.Watermark == offs[len(offs)-1]+1 })
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	got := rec.processed()
	for i, o := range offs {
		want := 0
		if i >= 6 {
			want = 1
		}
		if got[o] != want {
			t.Errorf("offset %d processed %d times, want %d", o, got[o], want)
		}
	}
}

// TestInvalidMetadataPolicy: undecodable metadata at the committed offset fails the claim
// under MetadataFail (Run returns ErrMetadata) and is ignored under MetadataIgnore.
func TestInvalidMetadataPolicy(t *testing.T) {
	brokers := testenv.KafkaBrokers(t)
	topic := testenv.NewTopic(t, "pc_badmeta", nil)
	offs := produce(t, brokers, topic, keyed(6, 2, "v")...)
	cl := newClient(t, brokers)
	for _, policy := range []MetadataPolicy{MetadataFail, MetadataIgnore} {
		t.Run(fmt.Sprint(policy), func(t *testing.T) {
			group := testenv.UniqueName("g")
			if err := CommitProgress(cl, group, topic, 0, parallel.Progress{Watermark: offs[2], Metadata: "not metadata!"}); err != nil {
				t.Fatal(err)
			}
			rec := newRecorder()
			cfg := testConfig(brokers, group, topic, func(_ context.Context, r parallel.Record[Message]) error {
				rec.add(r.Value)
				return nil
			})
			cfg.InvalidMetadata = policy
			if policy == MetadataFail {
				c, err := New(cfg)
				if err != nil {
					t.Fatal(err)
				}
				if err := c.Run(context.Background()); !errors.Is(err, parallel.ErrMetadata) {
					t.Fatalf("Run: %v, want ErrMetadata", err)
				}
				if n := len(rec.processed()); n != 0 {
					t.Fatalf("processed %d records", n)
				}
				return
			}
			_, stop := start(t, cfg)
			waitCommitted(t, cl, group, topic, "end", func(cp parallel.Checkpoint) bool { return cp.Watermark == offs[len(offs)-1]+1 })
			if err := stop(); err != nil {
				t.Fatal(err)
			}
			if n := len(rec.processed()); n != 4 {
				t.Fatalf("processed %d records, want 4 (from the committed offset)", n)
			}
		})
	}
}

// TestKafkaWarnings: New warns of a weak Kafka setting it accepts (SASL PLAIN without TLS).
func TestKafkaWarnings(t *testing.T) {
	var logs strings.Builder
	h := func(context.Context, parallel.Record[Message]) error { return nil }
	cfg := Config{Group: "g", Topics: []string{"t"}, Engine: parallel.Config[Message]{Handler: h},
		Kafka: kafkaconn.Config{Brokers: []string{"x"}, SASL: kafkaconn.SASL{Mechanism: kafkaconn.SASLPlain, User: "u", Password: "pw-SECRET"}}}
	if _, err := New(cfg, WithLogger(slog.New(slog.NewTextHandler(&logs, nil)))); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(logs.String(), "kafka.sasl.mechanism: PLAIN") || strings.Contains(logs.String(), "SECRET") {
		t.Errorf("no warning, or the password in it:\n%s", logs.String())
	}
}
