package saramapc_test

import (
	"context"
	"fmt"
	"log"
	"os"
	"os/signal"
	"strings"
	"time"

	"github.com/IBM/sarama"

	"github.com/statecast/statecast/parallel"
	"github.com/statecast/statecast/parallel/saramapc"
)

// The default mode: offsets and the completed-offsets metadata are committed every second
// by a committer goroutine. At least once: after a crash, up to one interval of completed
// records runs again, so the handler must tolerate a repeat.
func ExampleNew_async() {
	c, err := saramapc.New(saramapc.Config{
		Brokers: []string{"localhost:9092"},
		Group:   "pricing",
		Topics:  []string{"orders"},
		Engine: parallel.Config[saramapc.Message]{
			MaxConcurrency: 16, // key order by default: one key at a time, keys in parallel
			Handler: func(ctx context.Context, r parallel.Record[saramapc.Message]) error {
				return reprice(ctx, r.Key, r.Value.Value) // an error is retried (3 attempts)
			},
		},
		// Commit: saramapc.CommitAsync is the default.
	})
	if err != nil {
		log.Fatal(err)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	if err := c.Run(ctx); err != nil {
		log.Fatal(err)
	}
}

// The synchronous mode: the commit runs between submissions and a failed commit ends Run,
// so the consumer never runs more than one interval ahead of what it could commit.
func ExampleNew_sync() {
	c, err := saramapc.New(saramapc.Config{
		Brokers:        []string{"localhost:9092"},
		Group:          "billing",
		Topics:         []string{"invoices"},
		Commit:         saramapc.CommitSync,
		CommitInterval: 500 * time.Millisecond,
		Engine: parallel.Config[saramapc.Message]{
			Handler: func(ctx context.Context, r parallel.Record[saramapc.Message]) error {
				return charge(ctx, r.Value.Value)
			},
		},
	})
	if err != nil {
		log.Fatal(err)
	}
	if err := c.Run(context.Background()); err != nil {
		log.Printf("stopped: %v", err) // a refused commit, for example after a rebalance
	}
}

// The transactional mode: each input's outputs are committed in one Kafka transaction with
// the input's offset. Read with read_committed, every input has its outputs exactly once,
// in key order, even across crashes, rebalances and paused instances.
func ExampleNew_transactional() {
	c, err := saramapc.New(saramapc.Config{
		Brokers: []string{"localhost:9092"},
		Group:   "enricher",
		Topics:  []string{"clicks"},
		Commit:  saramapc.CommitTransactional,
		// Unique per running instance, stable across its restarts (here: per pod).
		TransactionalID: "enricher-" + os.Getenv("HOSTNAME"),
		CommitInterval:  100 * time.Millisecond, // outputs become visible after their commit
		TxnHandler: func(ctx context.Context, r parallel.Record[saramapc.Message], out *saramapc.Producer) error {
			enriched, err := enrich(ctx, r.Value.Value)
			if err != nil {
				return err // retried; what this attempt sent is dropped
			}
			out.Send(&sarama.ProducerMessage{Topic: "clicks-enriched", Key: sarama.ByteEncoder(r.Key), Value: sarama.ByteEncoder(enriched)})
			return nil
		},
	})
	if err != nil {
		log.Fatal(err)
	}
	if err := c.Run(context.Background()); err != nil {
		log.Fatal(err)
	}
}

// Records that still fail after their attempts go to a dead-letter topic with headers that
// say where they came from and why, and the partition goes on.
func ExampleConfig_deadLetterTopic() {
	c, err := saramapc.New(saramapc.Config{
		Brokers:         []string{"localhost:9092"},
		Group:           "pricing",
		Topics:          []string{"orders"},
		DeadLetterTopic: "orders-dlq",
		Engine: parallel.Config[saramapc.Message]{
			MaxAttempts: 5,
			Backoff:     parallel.ExponentialBackoff(100*time.Millisecond, 5*time.Second),
			OnFailure:   parallel.FailSkip, // required with DeadLetterTopic
			Handler: func(ctx context.Context, r parallel.Record[saramapc.Message]) error {
				return reprice(ctx, r.Key, r.Value.Value)
			},
		},
	})
	if err != nil {
		log.Fatal(err)
	}
	_ = c.Run(context.Background())
}

// A dead letter read back: its headers name the original record and the last error.
func ExampleDeadLetterMessage() {
	in := &sarama.ConsumerMessage{Topic: "orders", Partition: 3, Offset: 42, Key: []byte("o-17"), Value: []byte("{}")}
	m := saramapc.DeadLetterMessage("orders-dlq", in, 5, fmt.Errorf("price service: %w", context.DeadlineExceeded))
	for _, h := range m.Headers {
		if strings.HasPrefix(string(h.Key), "statecast.dlq.") {
			fmt.Printf("%s=%s\n", h.Key, h.Value)
		}
	}
	// Output:
	// statecast.dlq.topic=orders
	// statecast.dlq.partition=3
	// statecast.dlq.offset=42
	// statecast.dlq.attempts=5
	// statecast.dlq.error=price service: context deadline exceeded
}

func reprice(context.Context, []byte, []byte) error      { return nil }
func charge(context.Context, []byte) error               { return nil }
func enrich(_ context.Context, v []byte) ([]byte, error) { return v, nil }
