package saramapc

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/IBM/sarama"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/statecast/statecast/parallel"
	"github.com/statecast/statecast/parallel/pcprom"
)

// Option configures a Consumer.
type Option func(*options)

type options struct {
	log *slog.Logger
	reg prometheus.Registerer
}

// WithLogger sets the logger (default: discard); it is also the engines' logger unless
// Config.Engine.Logger is set.
func WithLogger(l *slog.Logger) Option { return func(o *options) { o.log = l } }

// WithRegisterer registers the engines' metrics with r (package pcprom: statecast_parallel_*,
// one series per claimed partition, label engine="topic/partition"). Default: not
// registered (Stats has the same numbers).
func WithRegisterer(r prometheus.Registerer) Option { return func(o *options) { o.reg = r } }

// Consumer is a sarama consumer group whose partitions run on parallel engines.
type Consumer struct {
	cfg Config
	log *slog.Logger

	mu      sync.Mutex
	fatal   error // first claim failure; ends Run
	cancel  context.CancelFunc
	runCtx  context.Context
	engines map[string]*parallel.Engine[Message] // live engines by "topic/partition"

	commits, commitFailures, outputs atomic.Int64
	// onCommit, when set (tests, benchmarks), runs after every commit attempt.
	onCommit func(topic string, partition int32, p parallel.Progress, outputs int, err error)
}

// CommitStats are the consumer's commit counters since New.
type CommitStats struct {
	// Commits counts successful commits: offset commits, or transactions under
	// CommitTransactional (one per claimed partition and commit).
	Commits int64
	// Failed counts commits that failed (aborted transactions included).
	Failed int64
	// Outputs counts the output records committed in transactions (dead letters included).
	Outputs int64
}

// CommitStats returns the commit counters.
func (c *Consumer) CommitStats() CommitStats {
	return CommitStats{Commits: c.commits.Load(), Failed: c.commitFailures.Load(), Outputs: c.outputs.Load()}
}

func (c *Consumer) committed(topic string, partition int32, p parallel.Progress, outputs int, err error) {
	if err != nil {
		c.commitFailures.Add(1)
	} else {
		c.commits.Add(1)
		c.outputs.Add(int64(outputs))
	}
	if c.onCommit != nil {
		c.onCommit(topic, partition, p, outputs, err)
	}
}

// New validates cfg (Config.Validate) and returns a Consumer; Run starts it.
func New(cfg Config, opts ...Option) (*Consumer, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	o := options{log: slog.New(slog.DiscardHandler)}
	for _, f := range opts {
		f(&o)
	}
	if cfg.Engine.Logger == nil {
		cfg.Engine.Logger = o.log
	}
	c := &Consumer{cfg: cfg, log: o.log, engines: map[string]*parallel.Engine[Message]{}}
	cfg.Kafka.LogWarnings(c.log)
	if o.reg != nil {
		if err := o.reg.Register(pcprom.NewCollector("statecast", c.Stats)); err != nil {
			return nil, fmt.Errorf("%w: metrics: %v", ErrConfig, err)
		}
	}
	return c, nil
}

// Stats returns the stats of the engines of the partitions currently claimed.
func (c *Consumer) Stats() map[string]parallel.Stats {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make(map[string]parallel.Stats, len(c.engines))
	for k, e := range c.engines {
		out[k] = e.Stats()
	}
	return out
}

// Run consumes until ctx ends (returns nil) or a claim fails (returns its error: a
// *parallel.RecordError under FailStop, a metadata error under MetadataFail, a commit error).
func (c *Consumer) Run(ctx context.Context) error {
	client, err := sarama.NewClient(c.cfg.Brokers, c.cfg.Sarama)
	if err != nil {
		return fmt.Errorf("saramapc: client: %w", err)
	}
	defer client.Close()
	group, err := sarama.NewConsumerGroupFromClient(c.cfg.Group, client)
	if err != nil {
		return fmt.Errorf("saramapc: consumer group: %w", err)
	}
	runCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	c.mu.Lock()
	c.runCtx, c.cancel = runCtx, cancel
	c.mu.Unlock()
	// Offset requests get their own connections: on the consumer's, the broker answers them
	// only after the fetch in front of them, which it holds for up to
	// Consumer.MaxWaitTime when the partition has no new records.
	offsetClient, err := sarama.NewClient(c.cfg.Brokers, c.cfg.Sarama)
	if err != nil {
		_ = group.Close()
		return fmt.Errorf("saramapc: client: %w", err)
	}
	defer offsetClient.Close()
	h := &groupHandler{c: c, coord: &coordinator{client: offsetClient, conf: c.cfg.Sarama, group: c.cfg.Group}}
	if c.cfg.needsProducer() {
		// Created before the group is joined: a transactional producer's start aborts what
		// an earlier instance with the same transactional id left open.
		p, err := sarama.NewSyncProducer(c.cfg.Brokers, c.cfg.Producer)
		if err != nil {
			_ = group.Close()
			return fmt.Errorf("saramapc: producer: %w", err)
		}
		defer p.Close() // after group.Close below: every claim has ended
		if c.cfg.Commit == CommitTransactional {
			h.txn = &txnProducer{p: p}
		} else {
			h.dlq = p
		}
	}

	var wg sync.WaitGroup
	wg.Go(func() {
		for err := range group.Errors() {
			c.log.Warn("saramapc: consumer error", "err", err)
		}
	})
	for runCtx.Err() == nil {
		if err := group.Consume(runCtx, c.cfg.Topics, h); err != nil {
			if errors.Is(err, sarama.ErrClosedConsumerGroup) {
				break
			}
			c.log.Warn("saramapc: consume", "err", err)
			select {
			case <-runCtx.Done():
			case <-time.After(time.Second):
			}
		}
	}
	closeErr := group.Close()
	wg.Wait()
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.fatal != nil {
		return c.fatal
	}
	if closeErr != nil && ctx.Err() == nil {
		return closeErr
	}
	return nil
}

func (c *Consumer) fail(err error) {
	c.mu.Lock()
	if c.fatal == nil {
		c.fatal = err
	}
	cancel := c.cancel
	c.mu.Unlock()
	cancel()
}

func (c *Consumer) closing() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.runCtx.Err() != nil
}

type groupHandler struct {
	c     *Consumer
	coord *coordinator
	txn   *txnProducer        // CommitTransactional
	dlq   sarama.SyncProducer // dead letters outside CommitTransactional
}

func (h *groupHandler) Setup(sarama.ConsumerGroupSession) error   { return nil }
func (h *groupHandler) Cleanup(sarama.ConsumerGroupSession) error { return nil }

func (h *groupHandler) ConsumeClaim(sess sarama.ConsumerGroupSession, claim sarama.ConsumerGroupClaim) error {
	err := h.consumeClaim(sess, claim)
	if err != nil {
		h.c.log.Error("saramapc: claim failed", "topic", claim.Topic(), "partition", claim.Partition(), "err", err)
		h.c.fail(err)
	}
	return err
}
