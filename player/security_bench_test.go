package player

import (
	"context"
	"crypto/tls"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/IBM/sarama"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/statecast/statecast/internal/grpctls"
	"github.com/statecast/statecast/internal/testenv"
	"github.com/statecast/statecast/kafkaconn"
	"github.com/statecast/statecast/schemas/gen/statecast/v1"
	"github.com/statecast/statecast/schemas/record"
	"github.com/statecast/statecast/schemas/record/recordsarama"
)

// BenchmarkSecurityDelay: the cost of TLS and tokens on the player-delay shape (20
// targets × 10 KB entries at 1,000 entries/s, all in this process over loopback). Two
// players, one plaintext and one with TLS and bearer tokens (each on its own topic, the
// same settings otherwise), are measured in alternating windows of the same run; the delay
// is from the player's dispatch of an entry (WithDispatchHook) to its arrival at each
// receiver, the span the security can add to. The secure receivers dial with the TLS
// credentials cacheclient uses (internal/grpctls). Reported: p50 and p99 of each, pooled over
// the rounds, and p99 secure / p99 plaintext (goal ≤ 1.2). Run it alone, once:
//
//	go test -run '^$' -bench SecurityDelay -benchtime 1x ./player/
//
// SECBENCH_ROUNDS and SECBENCH_WINDOW change the rounds (default 4: each system goes first
// in half of them) and the measured time per window (default 5s).
func BenchmarkSecurityDelay(b *testing.B) {
	const targets, size, rate, keys = 20, 10 << 10, 1000, 1000
	rounds, window, warm := 4, 5*time.Second, time.Second
	if v, err := strconv.Atoi(os.Getenv("SECBENCH_ROUNDS")); err == nil && v > 0 {
		rounds = v
	}
	if v, err := time.ParseDuration(os.Getenv("SECBENCH_WINDOW")); err == nil && v > 0 {
		window = v
	}
	brokers := testenv.KafkaBrokers(b)
	pki := testenv.NewPKI(b)
	tokens := filepath.Join(b.TempDir(), "tokens")
	if err := os.WriteFile(tokens, []byte("bench=tok-bench-0123456789abcdef\n"), 0o600); err != nil {
		b.Fatal(err)
	}
	systems := []*delaySystem{
		{name: "plaintext", dial: []grpc.DialOption{grpc.WithTransportCredentials(insecure.NewCredentials())}},
		{name: "tls+token", secure: func(c *Config) {
			c.Insecure = false
			c.TLS = TLSConfig{CertFile: pki.ServerCert, KeyFile: pki.ServerKey}
			c.Tokens = TokensConfig{File: tokens}
		}, dial: []grpc.DialOption{grpc.WithTransportCredentials(grpctls.ClientCredentials(&tls.Config{RootCAs: pki.Pool})),
			grpc.WithPerRPCCredentials(bearer("tok-bench-0123456789abcdef"))}},
	}
	for _, s := range systems {
		s.start(b, brokers, targets)
	}
	prod, err := sarama.NewAsyncProducer(brokers, kafkaconn.ProducerConfig("security-bench"))
	if err != nil {
		b.Fatal(err)
	}
	defer prod.Close()
	go func() {
		for range prod.Successes() {
		}
	}()
	go func() {
		for err := range prod.Errors() {
			b.Error(err)
		}
	}()
	value := make([]byte, size)
	for i := range value {
		value[i] = 'a' + byte(i%26)
	}
	b.ResetTimer()
	for range b.N {
		for r := range rounds {
			// The order alternates: within a round the later window runs on a warmer
			// process (the p99 falls round after round), which would favour one system.
			order := systems
			if r%2 == 1 {
				order = []*delaySystem{systems[1], systems[0]}
			}
			for _, s := range order {
				from := s.player.p.streams["s"].current.Load() + 1
				produceAt(prod, s.topic, value, rate, warm, keys)
				from = max(from, s.player.p.streams["s"].current.Load()+1) // after the warm-up
				produceAt(prod, s.topic, value, rate, window, keys)
				last := s.player.p.streams["s"].current.Load()
				waitAll := time.Now().Add(time.Minute)
				for !s.allHave(last) && time.Now().Before(waitAll) {
					time.Sleep(10 * time.Millisecond)
				}
				ds := s.delays(from, last)
				s.pooled = append(s.pooled, ds...)
				b.Logf("round %d %-10s %6d deliveries  p50 %7.3f ms  p99 %7.3f ms", r+1, s.name, len(ds), ms(quantile(ds, 0.5)), ms(quantile(ds, 0.99)))
			}
		}
	}
	b.StopTimer()
	for _, s := range systems {
		b.Logf("pooled   %-10s %6d deliveries  p50 %7.3f ms  p99 %7.3f ms", s.name, len(s.pooled), ms(quantile(s.pooled, 0.5)), ms(quantile(s.pooled, 0.99)))
		b.ReportMetric(ms(quantile(s.pooled, 0.5)), s.name+"-p50-ms")
		b.ReportMetric(ms(quantile(s.pooled, 0.99)), s.name+"-p99-ms")
		s.stop()
	}
	ratio := float64(quantile(systems[1].pooled, 0.99)) / float64(quantile(systems[0].pooled, 0.99))
	b.ReportMetric(ratio, "p99-ratio")
	b.Logf("p99 %s / %s = %.2f (goal ≤ 1.2)", systems[1].name, systems[0].name, ratio)
}

// delaySystem is one player of BenchmarkSecurityDelay with its receivers.
type delaySystem struct {
	name   string
	secure func(*Config)
	dial   []grpc.DialOption
	topic  string
	player *testPlayer
	cancel context.CancelFunc
	wg     sync.WaitGroup

	mu         sync.Mutex
	dispatched map[int64]time.Time
	recv       []*delayReceiver
	pooled     []time.Duration
}

type delayReceiver struct {
	mu    sync.Mutex
	got   map[int64]time.Time
	last  int64 // the highest index acknowledged
	ready bool  // its snapshot ended
}

func (s *delaySystem) start(b *testing.B, brokers []string, targets int) {
	b.Helper()
	s.topic = testenv.NewTopic(b, "secbench", map[string]string{"cleanup.policy": "compact"})
	s.dispatched = map[int64]time.Time{}
	e := &env{brokers: brokers, topic: s.topic, last: -1}
	s.player = startPlayerTB(b, e, func(c *Config) {
		c.ProgressInterval = time.Second
		if s.secure != nil {
			s.secure(c)
		}
	}, WithDispatchHook(func(_ string, index int64, at time.Time) {
		s.mu.Lock()
		s.dispatched[index] = at
		s.mu.Unlock()
	}))
	ctx, cancel := context.WithCancel(context.Background())
	s.cancel = cancel
	for i := range targets {
		r := &delayReceiver{got: map[int64]time.Time{}, last: -1}
		s.recv = append(s.recv, r)
		s.wg.Go(func() { _ = r.run(ctx, s.player.addr, s.dial, fmt.Sprintf("r%d", i)) })
	}
	deadline := time.Now().Add(30 * time.Second)
	for len(s.player.p.Status().Streams[0].Targets) < targets || !s.allHave(-1) {
		if time.Now().After(deadline) {
			b.Fatalf("%s: receivers not connected", s.name)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func (s *delaySystem) stop() {
	s.cancel()
	s.wg.Wait()
	s.player.stop()
}

// allHave reports whether every receiver has its snapshot and index i.
func (s *delaySystem) allHave(i int64) bool {
	for _, r := range s.recv {
		r.mu.Lock()
		ok := r.ready && r.last >= i
		r.mu.Unlock()
		if !ok {
			return false
		}
	}
	return true
}

// delays are dispatch → arrival of every entry in [from, to] at every receiver.
func (s *delaySystem) delays(from, to int64) []time.Duration {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []time.Duration
	for _, r := range s.recv {
		r.mu.Lock()
		for i, at := range r.got {
			if i >= from && i <= to {
				if d, ok := s.dispatched[i]; ok {
					out = append(out, at.Sub(d))
				}
			}
			delete(r.got, i)
		}
		r.mu.Unlock()
	}
	clear(s.dispatched)
	return out
}

// run subscribes at the head (a snapshot of the current state first) and stamps every
// entry's arrival, acking each frame.
func (r *delayReceiver) run(ctx context.Context, addr string, dial []grpc.DialOption, id string) error {
	conn, err := grpc.NewClient(addr, append(dial, grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(64<<20)))...)
	if err != nil {
		return err
	}
	defer conn.Close()
	st, err := statecastv1.NewPlayerClient(conn).Subscribe(ctx)
	if err != nil {
		return err
	}
	if err := st.Send(&statecastv1.SubscribeRequest{Msg: &statecastv1.SubscribeRequest_Hello{Hello: &statecastv1.Hello{
		ClientId: id, Service: "bench", Stream: "s", MaxBatchEntries: 512}}}); err != nil {
		return err
	}
	inSnap := false
	for {
		m, err := st.Recv()
		if err != nil {
			return err
		}
		now := time.Now()
		ack := int64(-2)
		switch {
		case m.GetSnapshotBegin() != nil:
			inSnap = true
		case m.GetSnapshotEnd() != nil:
			inSnap = false
			ack = m.GetSnapshotEnd().GetIndex()
			r.mu.Lock()
			r.ready = true
			r.mu.Unlock()
		case m.GetProgress() != nil:
			ack = m.GetProgress().GetIndex()
		case m.GetBatch() != nil && !inSnap:
			es := m.GetBatch().GetEntries()
			r.mu.Lock()
			for _, e := range es {
				r.got[e.GetIndex()] = now
			}
			r.mu.Unlock()
			if len(es) > 0 {
				ack = es[len(es)-1].GetIndex()
			}
		}
		if ack >= -1 {
			r.mu.Lock()
			r.last = max(r.last, ack)
			r.mu.Unlock()
			if err := st.Send(&statecastv1.SubscribeRequest{Msg: &statecastv1.SubscribeRequest_Ack{Ack: &statecastv1.Ack{Index: ack}}}); err != nil {
				return err
			}
		}
	}
}

// produceAt sends value to topic at rate entries/s for d, over keys keys: the i-th at
// start + i/rate, at once when that time has passed. (A ticker drops the ticks its reader
// misses: the offered load would then depend on the system measured.)
func produceAt(prod sarama.AsyncProducer, topic string, value []byte, rate int, d time.Duration, keys int) {
	interval := time.Second / time.Duration(rate)
	start := time.Now()
	for i := range int(d / interval) {
		if wait := time.Until(start.Add(time.Duration(i) * interval)); wait > 0 {
			time.Sleep(wait)
		}
		k := record.EncodeKey("a", strconv.Itoa(i%keys))
		prod.Input() <- recordsarama.ProducerMessage(topic, k, value, record.Meta{View: "a", Kind: record.KindRow, Epoch: 1, SourceTime: time.Now()})
	}
}

func quantile(ds []time.Duration, q float64) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[min(len(s)-1, int(q*float64(len(s))))]
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
