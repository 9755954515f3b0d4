package player

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/statecast/statecast/internal/testenv"
	"github.com/statecast/statecast/schemas/gen/statecast/v1"
	"github.com/statecast/statecast/schemas/record"
	"github.com/statecast/statecast/schemas/record/recordsarama"
)

// TestPoisonRecordsSkipped: a row whose sc-view header names another view than its key
// (a foreign producer on the topic) and a record over max_record_bytes are never served —
// not live, not in a snapshot, not in a recovery from Kafka — and each is counted; the
// records around them are served, and every client reaches the end of the log.
func TestPoisonRecordsSkipped(t *testing.T) {
	e := newEnv(t, nil)
	e.produce(5, []string{"a", "b"}, 10, newRand(1))
	var logs testenv.LockedBuffer
	tp := startPlayerTB(t, e, func(c *Config) { c.MaxRecordBytes = 64 << 10; c.HistoryBytes = 1 },
		WithLogger(slog.New(slog.NewTextHandler(&logs, nil))))
	if !strings.Contains(logs.String(), "the topic accepts records larger than max_record_bytes") {
		t.Errorf("no warning at start that the topic's max.message.bytes exceeds max_record_bytes:\n%s", logs.String())
	}
	conn, err := grpc.NewClient(tp.addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	var end int64 = -1
	endKnown := make(chan struct{})
	last := func() int64 {
		select {
		case <-endKnown:
			return end
		default:
			return -1
		}
	}

	type result struct {
		indexes map[int64]bool
		err     error
	}
	// read subscribes (resume: nil for a snapshot) and collects the indexes of the entries
	// it receives until it has seen the index last.
	read := func(id string, resume *int64, last func() int64) <-chan result {
		out := make(chan result, 1)
		st, err := statecastv1.NewPlayerClient(conn).Subscribe(ctx)
		if err == nil {
			err = st.Send(&statecastv1.SubscribeRequest{Msg: &statecastv1.SubscribeRequest_Hello{Hello: &statecastv1.Hello{ClientId: id, Stream: "s", ResumeIndex: resume}}})
		}
		if err != nil {
			t.Fatal(err)
		}
		// Recv runs in its own goroutine: the last entry may arrive before the end is
		// known, and then nothing more is sent; the collector must also wake on endKnown.
		msgs := make(chan *statecastv1.SubscribeResponse)
		recvErr := make(chan error, 1)
		go func() {
			for {
				m, err := st.Recv()
				if err != nil {
					recvErr <- err
					return
				}
				select {
				case msgs <- m:
				case <-ctx.Done():
					return
				}
			}
		}()
		go func() {
			got := map[int64]bool{}
			seen := int64(-1)
			known := endKnown
			for {
				if l := last(); l >= 0 && seen >= l {
					out <- result{indexes: got}
					return
				}
				var m *statecastv1.SubscribeResponse
				select {
				case m = <-msgs:
				case err := <-recvErr:
					out <- result{err: err}
					return
				case <-known:
					known = nil // closed: stop selecting it
					continue
				}
				for _, en := range m.GetBatch().GetEntries() {
					got[en.GetIndex()] = true
					seen = max(seen, en.GetIndex())
				}
				seen = max(seen, m.GetProgress().GetIndex(), m.GetSnapshotEnd().GetIndex())
			}
		}()
		return out
	}

	live := read("live", nil, last)
	// Admitted and following the log before the poison is produced: it gets it live.
	waitFor(t, 30*time.Second, "the live target in N", func() bool { return targetStatus(tp.p, "live").State == "N" })

	meta := record.Meta{View: "b", Kind: record.KindRow, Epoch: 1, SourceTime: time.Now(), SourceLSN: "0/1"}
	foreign := recordsarama.ProducerMessage(e.topic, record.EncodeKey("a", "foreign"), []byte(`{"id":"foreign"}`), meta)
	meta.View = "a"
	big := recordsarama.ProducerMessage(e.topic, record.EncodeKey("a", "big"), []byte(`{"pad":"`+strings.Repeat("x", 100<<10)+`"}`), meta)
	var poisoned []int64
	if _, _, err := e.prod.SendMessage(foreign); err != nil {
		t.Fatal(err)
	}
	poisoned = append(poisoned, foreign.Offset)
	if _, _, err := e.prod.SendMessage(big); err != nil {
		t.Fatal(err)
	}
	poisoned = append(poisoned, big.Offset)
	end = e.produce(5, []string{"a", "b"}, 10, newRand(2))
	close(endKnown)

	zero := int64(0)
	for name, ch := range map[string]<-chan result{
		"live":                live,
		"snapshot":            read("snapshot", nil, last),
		"recovery from Kafka": read("recovery", &zero, last),
	} {
		r := <-ch
		if r.err != nil {
			t.Fatalf("%s: the stream ended before the end of the log: %v", name, r.err)
		}
		for _, i := range poisoned {
			if r.indexes[i] {
				t.Errorf("%s: the poison record at %d was served", name, i)
			}
		}
		if name != "snapshot" && !r.indexes[end] { // a snapshot holds rows only: the last may be a tombstone
			t.Errorf("%s: the last record %d was not served", name, end)
		}
	}
	for _, want := range []string{
		fmt.Sprintf("offset=%d key=a|foreign view=b reason=%s", foreign.Offset, skipViewMismatch),
		fmt.Sprintf("offset=%d key=a|big view=a reason=%s", big.Offset, skipTooLarge),
	} {
		if !strings.Contains(logs.String(), want) {
			t.Errorf("no log line with %q", want)
		}
	}
	for _, why := range []string{skipViewMismatch, skipTooLarge} {
		var m dto.Metric
		if err := tp.p.metrics.skipped.WithLabelValues("s", why).Write(&m); err != nil {
			t.Fatal(err)
		}
		if n := m.GetCounter().GetValue(); n != 1 {
			t.Errorf("records_skipped_total{reason=%q} = %v, want 1", why, n)
		}
	}
}
