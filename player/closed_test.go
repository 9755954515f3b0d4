package player

import (
	"context"
	"errors"
	"net"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/IBM/sarama"
	"github.com/IBM/sarama/mocks"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
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
// before the error), the main fetcher ends with ErrStreamUnavailable wrapping the cause —
// never nil, which stream.run would take for a clean stop while the stream is no longer
// fed.
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
				go func() { done <- s.fetch(context.Background()) }()
				select {
				case err := <-done:
					if !errors.Is(err, ErrStreamUnavailable) {
						t.Fatalf("main fetcher ended with %v, want ErrStreamUnavailable", err)
					}
					if tc.err != nil && !errors.Is(err, tc.err) {
						t.Fatalf("main fetcher ended with %v, which does not wrap the cause %v", err, tc.err)
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

// TestMainFetcherStopsStreamAlone: when sarama closes the main fetcher's partition
// consumer under a running player, the stream is unavailable — its status names the cause,
// a Hello is refused with Unavailable naming the stream, and health is NOT_SERVING (it is
// the player's only stream) — and Run goes on: the stream is tried again, reads its topic
// from the start and serves, health SERVING again.
func TestMainFetcherStopsStreamAlone(t *testing.T) {
	e := newEnv(t, nil)
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p, err := New(Config{Insecure: true, Kafka: kafkaconn.Config{Brokers: e.brokers}, Streams: []StreamConfig{{Name: "s", Topic: e.topic}}})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	closeIt := make(chan struct{})
	var real atomic.Bool // from then on the main fetcher gets a real consumer
	p.streams["s"].consumerHook = func(client sarama.Client) (sarama.Consumer, error) {
		if real.Load() {
			return sarama.NewConsumerFromClient(client)
		}
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
	go func() { _ = p.Serve(lis) }()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := p.WaitReady(ctx); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 10*time.Second, "health SERVING", func() bool { return healthOf(p) == healthpb.HealthCheckResponse_SERVING })
	close(closeIt)
	waitFor(t, 30*time.Second, "the stream unavailable", func() bool { return p.streams["s"].Status().State == StreamUnavailable })
	if st := p.streams["s"].Status(); !strings.Contains(st.FetchError, "partition consumer closed") || st.LastError == "" || st.Ready {
		t.Errorf("status of the stopped stream: %+v", st)
	}
	if h := healthOf(p); h != healthpb.HealthCheckResponse_NOT_SERVING {
		t.Errorf("health %s with its only stream unavailable, want NOT_SERVING", h)
	}
	_, err = subscribe(t, lis.Addr().String(), []grpc.DialOption{grpc.WithTransportCredentials(insecure.NewCredentials())}, helloOf("c"))
	wantCode(t, "a Hello for the stopped stream", err, codes.Unavailable, `stream "s"`, e.topic, "partition consumer closed")

	real.Store(true)
	e.produce(20, []string{"a"}, 10, newRand(3))
	last := e.lastOffset()
	waitFor(t, 60*time.Second, "the stream serving again", func() bool {
		st := p.streams["s"].Status()
		return st.State == StreamReady && st.Current == last
	})
	waitFor(t, 10*time.Second, "health SERVING again", func() bool { return healthOf(p) == healthpb.HealthCheckResponse_SERVING })
	select {
	case err := <-done:
		t.Fatalf("Run returned %v while its stream was unavailable", err)
	default:
	}
	c := newClient("c", e.chk)
	sessionUntil(t, c, lis.Addr().String(), 30*time.Second, func() bool { return c.Applied() >= last })
	e.check()
}

func healthOf(p *Player) healthpb.HealthCheckResponse_ServingStatus {
	r, err := p.health.Check(context.Background(), &healthpb.HealthCheckRequest{Service: statecastv1.Player_ServiceDesc.ServiceName})
	if err != nil {
		return healthpb.HealthCheckResponse_UNKNOWN
	}
	return r.GetStatus()
}
