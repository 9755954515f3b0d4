package player

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/IBM/sarama"
	"github.com/IBM/sarama/mocks"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	"github.com/statecast/statecast/kafkaconn"
	"github.com/statecast/statecast/schemas/gen/statecast/v1"
)

// closingConsumer returns a consumerHook whose partition consumer, opened at offset,
// yields n records (offset, offset+1, …), then, as sarama does when it gives up on an
// offset out of range, sends err (if any) and closes its channels.
func closingConsumer(t *testing.T, topic string, offset int64, n int, err error) func(sarama.Client) (sarama.Consumer, error) {
	return func(sarama.Client) (sarama.Consumer, error) {
		c := mocks.NewConsumer(t, nil)
		pc := c.ExpectConsumePartition(topic, 0, offset)
		for i := range n {
			pc.YieldMessage(&sarama.ConsumerMessage{Key: []byte("v|" + string(rune('a'+i%26))), Value: []byte(`{}`)})
		}
		if err != nil {
			pc.YieldError(err)
		}
		pc.AsyncClose()
		return c, nil
	}
}

func newUnconnectedPlayer(t *testing.T) *Player {
	t.Helper()
	p, err := New(Config{Insecure: true, Kafka: kafkaconn.Config{Brokers: []string{"unused:9092"}}, Streams: []StreamConfig{{Name: "s", Topic: "t"}}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Close() })
	return p
}

// TestMainFetcherConsumerClosed: when sarama closes the main fetcher's partition consumer
// (it does after an offset out of range, and a select may see the closed Messages channel
// before the error), the main fetcher ends with an error — never nil, which Player.Run
// would take for a clean stop while the stream is no longer fed.
func TestMainFetcherConsumerClosed(t *testing.T) {
	for _, tc := range []struct {
		name string
		err  error
	}{
		{"after an offset out of range", sarama.ErrOffsetOutOfRange},
		{"without an error", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for range 20 { // the order in which a select sees the two channels is random
				p := newUnconnectedPlayer(t)
				s := p.streams["s"]
				s.offsetsHook = func() (int64, int64, error) { return 0, 2, nil }
				s.consumerHook = closingConsumer(t, "t", 0, 2, tc.err)
				done := make(chan error, 1)
				go func() { done <- s.run(context.Background()) }()
				select {
				case err := <-done:
					if !errors.Is(err, ErrStreamUnavailable) {
						t.Fatalf("main fetcher ended with %v, want ErrStreamUnavailable", err)
					}
					if tc.err != nil && !errors.Is(err, tc.err) && s.Status().FetchError == "" {
						t.Fatalf("the cause %v is neither in %v nor in the status", tc.err, err)
					}
				case <-time.After(10 * time.Second):
					t.Fatal("main fetcher did not end after its consumer closed")
				}
				_ = p.Close()
			}
		})
	}
}

// TestKafkaSourceConsumerClosed: a recovery reading from Kafka whose partition consumer
// sarama closed ends with errLogStartMoved (offset out of range: the target resyncs) or a
// recovery failure (no cause) — never a nil message dereference.
func TestKafkaSourceConsumerClosed(t *testing.T) {
	for _, tc := range []struct {
		name string
		err  error
		want error
	}{
		{"after an offset out of range", sarama.ErrOffsetOutOfRange, errLogStartMoved},
		{"without an error", nil, ErrStreamUnavailable},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for range 20 {
				p := newUnconnectedPlayer(t)
				s := p.streams["s"]
				s.consumerHook = closingConsumer(t, "t", 0, 2, tc.err)
				tg := newTarget(s, "r", nil, 1, StateRF, 512, 1<<20)
				tg.lastAck, tg.sentUpTo = -1, -1
				k := tg.kafkaSource(1)
				next, err := k.read(0, 10)
				k.close()
				if !errors.Is(err, tc.want) {
					t.Fatalf("read ended with %v, want %v", err, tc.want)
				}
				// The select may see the error or the closed channels before the records.
				if got := catchupIndexes(tg); next < 0 || next > 2 || len(got) != int(next) {
					t.Fatalf("read stopped at %d with %v queued, want the records before it", next, got)
				}
				_ = p.Close()
			}
		})
	}
}

// Status of one stream (tests).
func (s *stream) Status() StreamStatus {
	for _, st := range s.p.Status().Streams {
		if st.Name == s.cfg.Name {
			return st
		}
	}
	return StreamStatus{}
}

// TestRunEndsWhenMainFetcherStops: Player.Run ends with the main fetcher's error when its
// partition consumer is closed under it, and health is NOT_SERVING: a player whose stream
// is no longer fed must not look healthy (clients fail over; a supervisor restarts it).
func TestRunEndsWhenMainFetcherStops(t *testing.T) {
	e := newEnv(t, nil)
	p, err := New(Config{Insecure: true, Kafka: kafkaconn.Config{Brokers: e.brokers}, Streams: []StreamConfig{{Name: "s", Topic: e.topic}}})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	closeIt := make(chan struct{})
	p.streams["s"].consumerHook = func(sarama.Client) (sarama.Consumer, error) {
		c := mocks.NewConsumer(t, nil)
		pc := c.ExpectConsumePartition(e.topic, 0, 0)
		go func() {
			<-closeIt
			pc.AsyncClose()
		}()
		return c, nil
	}
	done := make(chan error, 1)
	go func() { done <- p.Run(context.Background()) }()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := p.WaitReady(ctx); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 10*time.Second, "health SERVING", func() bool { return healthOf(p) == healthpb.HealthCheckResponse_SERVING })
	close(closeIt)
	select {
	case err := <-done:
		if !errors.Is(err, ErrStreamUnavailable) {
			t.Fatalf("Run returned %v, want ErrStreamUnavailable", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("Run still running after its main fetcher stopped")
	}
	if h := healthOf(p); h != healthpb.HealthCheckResponse_NOT_SERVING {
		t.Fatalf("health %s after the main fetcher stopped, want NOT_SERVING", h)
	}
}

func healthOf(p *Player) healthpb.HealthCheckResponse_ServingStatus {
	r, err := p.health.Check(context.Background(), &healthpb.HealthCheckRequest{Service: statecastv1.Player_ServiceDesc.ServiceName})
	if err != nil {
		return healthpb.HealthCheckResponse_UNKNOWN
	}
	return r.GetStatus()
}
