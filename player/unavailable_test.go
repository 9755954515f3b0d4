package player

import (
	"context"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/IBM/sarama"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	"github.com/statecast/statecast/internal/checker"
	"github.com/statecast/statecast/internal/testenv"
	"github.com/statecast/statecast/kafkaconn"
)

// TestUnusableTopicStreamAlone: one player serves a stream whose topic is good, one whose
// topic does not exist and one whose topic has three partitions. The good stream serves
// from the start and all along; a Hello for either of the others is refused with
// Unavailable naming the stream, the topic and why; the status and /readyz (200: one
// stream serves) name them; once the missing topic is created, its stream comes up by
// itself (it is tried again) and serves a snapshot of what was written to it.
func TestUnusableTopicStreamAlone(t *testing.T) {
	e := newEnv(t, nil)
	e.produce(100, []string{"a", "b"}, 20, newRand(21))
	compact := map[string]string{"cleanup.policy": "compact"}
	multi := testenv.NewTopicPartitions(t, "player-multi", 3, compact)
	missing := testenv.UniqueName("player-late")
	t.Cleanup(func() {
		if a, err := sarama.NewClusterAdmin(e.brokers, kafkaconn.NewConfig("player-test")); err == nil {
			_ = a.DeleteTopic(missing)
			_ = a.Close()
		}
	})
	tp := startPlayer(t, e, func(c *Config) {
		c.Streams = append(c.Streams, StreamConfig{Name: "late", Topic: missing}, StreamConfig{Name: "multi", Topic: multi})
	})
	h := httptest.NewServer(tp.p.Handler())
	defer h.Close()
	plain := []grpc.DialOption{grpc.WithTransportCredentials(insecure.NewCredentials())}

	// The good stream serves, and a client of it stays connected through what follows.
	good := newClient("good", e.chk)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	goodErr := make(chan error, 1)
	go func() { goodErr <- good.session(ctx, tp.addr, 0, nil) }()
	waitFor(t, 30*time.Second, "the good stream's client caught up", func() bool { return good.Applied() >= e.lastOffset() })

	for _, tc := range []struct{ stream, topic, why string }{
		{"late", missing, "does not exist"},
		{"multi", multi, "3 partitions"},
	} {
		hello := helloOf("c-" + tc.stream)
		hello.Stream = tc.stream
		_, err := subscribe(t, tp.addr, plain, hello)
		wantCode(t, "a Hello for stream "+tc.stream, err, codes.Unavailable, `stream "`+tc.stream+`"`, tc.topic, tc.why)
		st := tp.p.streams[tc.stream].Status()
		if st.State != StreamUnavailable || !strings.Contains(st.FetchError, tc.why) || st.RetryAt.IsZero() || st.Ready {
			t.Errorf("status of stream %s: %+v", tc.stream, st)
		}
	}
	code, r := readyz(t, h)
	if code != 200 || !r.Ready || r.Streams["s"] != StreamReady || r.Streams["late"] != StreamUnavailable ||
		r.Streams["multi"] != StreamUnavailable || !strings.Contains(r.Errors["late"], "does not exist") || !strings.Contains(r.Errors["multi"], "3 partitions") {
		t.Errorf("/readyz with one stream of three serving: %d %+v", code, r)
	}
	if hs := healthOf(tp.p); hs != healthpb.HealthCheckResponse_SERVING {
		t.Errorf("health %s with one stream of three serving, want SERVING", hs)
	}
	metrics := get(t, h, "/metrics")
	for _, want := range []string{`statecast_player_stream_state{state="ready",stream="s"} 1`,
		`statecast_player_stream_state{state="unavailable",stream="late"} 1`, `statecast_player_stream_state{state="ready",stream="late"} 0`} {
		if !strings.Contains(metrics, want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}

	// The missing topic is created and written: its stream comes up without a restart.
	admin, err := sarama.NewClusterAdmin(e.brokers, kafkaconn.NewConfig("player-test"))
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close()
	policy := "compact"
	if err := admin.CreateTopic(missing, &sarama.TopicDetail{NumPartitions: 1, ReplicationFactor: 1,
		ConfigEntries: map[string]*string{"cleanup.policy": &policy}}, false); err != nil {
		t.Fatal(err)
	}
	late := &env{t: t, brokers: e.brokers, topic: missing, prod: e.prod, chk: checker.New(), last: -1}
	late.produce(60, []string{"x", "y"}, 20, newRand(22))
	waitFor(t, 90*time.Second, "the late stream ready", func() bool {
		st := tp.p.streams["late"].Status()
		return st.State == StreamReady && st.Current >= late.lastOffset()
	})
	if st := tp.p.streams["late"].Status(); st.FetchError != "" || !strings.Contains(st.LastError, "does not exist") {
		t.Errorf("status of the late stream once it serves: %+v", st)
	}
	lc := newClient("late-client", late.chk)
	lc.stream = "late"
	sessionUntil(t, lc, tp.addr, 30*time.Second, func() bool { return lc.Applied() >= late.lastOffset() })
	late.check()

	e.produce(50, []string{"a", "b"}, 20, newRand(23))
	waitFor(t, 30*time.Second, "the good stream's client got the new records", func() bool { return good.Applied() >= e.lastOffset() })
	select {
	case err := <-goodErr:
		t.Fatalf("the good stream's client ended: %v", err)
	default:
	}
	if code, r := readyz(t, h); code != 200 || r.Streams["late"] != StreamReady || r.Streams["multi"] != StreamUnavailable {
		t.Errorf("/readyz at the end: %d %+v", code, r)
	}
	cancel()
	if err := <-goodErr; err != nil {
		t.Errorf("session: %v", err)
	}
	e.check()
}
