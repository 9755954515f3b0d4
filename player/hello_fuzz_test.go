package player

import (
	"context"
	"errors"
	"io"
	"strings"
	"testing"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/IBM/sarama"
	"google.golang.org/protobuf/proto"

	"github.com/statecast/statecast/kafkaconn"
	"github.com/statecast/statecast/schemas/gen/statecast/v1"
	"github.com/statecast/statecast/schemas/record"
	"github.com/statecast/statecast/schemas/wire"
)

// scriptedServer is a Subscribe stream whose client messages come from a script.
type scriptedServer struct {
	statecastv1.Player_SubscribeServer
	recv func() (*statecastv1.SubscribeRequest, error)
}

func (s *scriptedServer) Recv() (*statecastv1.SubscribeRequest, error) { return s.recv() }
func (s *scriptedServer) Context() context.Context                     { return context.Background() }

// FuzzHelloAcks: what a client may send — any Hello (raw bytes), then any sequence of
// Acks, Hellos and empty messages, interleaved with batches the player sends. The Hello
// is accepted only within its bounds (views, their names, the resume index); the target's
// receiver never panics, keeps last_ack monotonic and never above what was sent, releases
// exactly the sent batches an ack covers, and ends with the error the first bad message
// calls for (ErrBadHello, ErrBadAck) or ErrSuspended when the client closes. Whether a
// Hello is accepted, and with which error it is refused, is helloOracle's: the rules
// written out again on their own, so that a rule added to validateHello without it here
// (or the other way round) fails the target at once.
func FuzzHelloAcks(f *testing.F) {
	seed, _ := proto.Marshal(&statecastv1.Hello{ClientId: "c", Stream: "s", Views: []string{"a", "b"}})
	f.Add(seed, []byte{0, 0, 0, 0, 1, 0, 1, 1, 0, 0})
	f.Add(seed, []byte{1, 0x80})
	f.Add(seed, []byte{0, 0, 2, 0})
	f.Add(seed, []byte{0, 0, 1, 3, 3, 0})
	neg, _ := proto.Marshal(&statecastv1.Hello{Stream: "s", ResumeIndex: proto.Int64(-7), Views: []string{"a|b"}})
	f.Add(neg, []byte{})
	p, err := New(Config{Insecure: true, Kafka: kafkaconn.Config{Brokers: []string{"unused:9092"}}, Streams: []StreamConfig{{Name: "s", Topic: "t"}}, MaxHelloViews: 8})
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(func() { _ = p.Close() })
	s := p.streams["s"]
	f.Fuzz(func(t *testing.T, helloBytes, prog []byte) {
		var h statecastv1.Hello
		if proto.Unmarshal(helloBytes, &h) != nil {
			return
		}
		err := validateHello(&h, p.cfg.MaxHelloViews)
		if want := helloOracle(&h, p.cfg.MaxHelloViews); want == nil {
			if err != nil {
				t.Fatalf("hello %v refused with %v, want it accepted", &h, err)
			}
		} else {
			if !errors.Is(err, want) {
				t.Fatalf("hello %v: got %v, want %v", &h, err, want)
			}
			return
		}

		tg := newTarget(s, "c", h.GetViews(), 1, StateN, 3, 1<<20)
		tg.lastAck, tg.sentUpTo = -1, -1
		next := int64(0)
		var want error // what the first bad message must end the target with
		lastAck := int64(-1)
		pc := 0
		check := func() {
			tg.mu.Lock()
			defer tg.mu.Unlock()
			if tg.lastAck < lastAck || tg.lastAck > tg.sentUpTo {
				t.Fatalf("last_ack %d (was %d), sent up to %d", tg.lastAck, lastAck, tg.sentUpTo)
			}
			lastAck = tg.lastAck
			var sum int64
			for _, b := range tg.q.popped {
				if b.last <= tg.lastAck {
					t.Fatalf("a batch up to %d still unacked after ack %d", b.last, tg.lastAck)
				}
				sum += b.bytes
			}
			if sum != tg.q.poppedBytes {
				t.Fatalf("popped bytes %d, batches hold %d", tg.q.poppedBytes, sum)
			}
		}
		srv := &scriptedServer{recv: func() (*statecastv1.SubscribeRequest, error) {
			check()
			for ; pc+1 < len(prog); pc += 2 {
				op, arg := prog[pc]%4, prog[pc+1]
				switch op {
				case 0: // the player sends a batch of 1+arg%4 entries
					tg.mu.Lock()
					for range 1 + arg%4 {
						tg.q.push(itemOf(&sarama.ConsumerMessage{Key: []byte("a|1"), Value: []byte("{}"), Offset: next}), true, tg.q.term)
						next++
					}
					for b := tg.q.nextBatch(tg.maxEntries, tg.maxBytes, nil, time.Now()); len(b) > 0; b = tg.q.nextBatch(tg.maxEntries, tg.maxBytes, nil, time.Now()) {
						tg.sentUpTo = max(tg.sentUpTo, b[len(b)-1].index)
					}
					tg.mu.Unlock()
					continue
				case 1: // an ack, at or below what was sent unless arg's top bit says otherwise
					tg.mu.Lock()
					idx := tg.sentUpTo - int64(arg&0x7f)%4
					if arg&0x80 != 0 {
						idx = tg.sentUpTo + 1 + int64(arg&0x7f)
						want = ErrBadAck
					}
					tg.mu.Unlock()
					pc += 2
					return &statecastv1.SubscribeRequest{Msg: &statecastv1.SubscribeRequest_Ack{Ack: &statecastv1.Ack{Index: idx}}}, nil
				case 2:
					pc += 2
					want = ErrBadHello
					return &statecastv1.SubscribeRequest{Msg: &statecastv1.SubscribeRequest_Hello{Hello: &h}}, nil
				case 3:
					pc += 2
					want = ErrBadHello
					return &statecastv1.SubscribeRequest{}, nil
				}
			}
			want = ErrSuspended
			return nil, io.EOF
		}}
		tg.receive(srv)
		check()
		tg.mu.Lock()
		got := tg.err
		tg.mu.Unlock()
		if !errors.Is(got, want) {
			t.Fatalf("the target ended with %v, want %v", got, want)
		}
	})
}

// TestHelloNames: the names a client chooses that reach logs and labels — stream, service,
// client id — are bounded in length and to letters, digits and printable ASCII: control
// characters (U+0085 too), bidirectional overrides and zero-width characters are refused.
func TestHelloNames(t *testing.T) {
	long := strings.Repeat("s", 64<<10)
	for name, h := range map[string]*statecastv1.Hello{
		"a 64 KiB stream":            {Stream: long},
		"a stream with a newline":    {Stream: "s\nforged log line"},
		"a bidi override":            {Stream: "s", Service: "pricing\u202eecirp"},
		"a next line (U+0085)":       {Stream: "s", Service: "a\u0085b"},
		"a zero-width space":         {Stream: "s", ClientId: "pricing\u200b"},
		"a zero-width joiner":        {Stream: "s", Service: "pri\u200dcing"},
		"a byte-order mark":          {Stream: "s", ClientId: "\ufeffpricing"},
		"a line separator":           {Stream: "s", Service: "a\u2028b"},
		"a 257-byte service":         {Stream: "s", Service: strings.Repeat("x", 257)},
		"a stream with a zero-width": {Stream: "s\u200b"},
	} {
		if err := validateHello(h, 8); !errors.Is(err, ErrBadHello) {
			t.Errorf("%s: %v, want ErrBadHello", name, err)
		} else if len(err.Error()) > 512 {
			t.Errorf("%s: the error repeats the name (%d bytes)", name, len(err.Error()))
		}
	}
	for _, h := range []*statecastv1.Hello{
		{Stream: "sportsbook", Service: "pricing", ClientId: "pricing-7d9f/1"},
		{Stream: "s.v1-x_y", Service: "Zürich pricing", ClientId: "host:1234@abc+1"},
	} {
		if err := validateHello(h, 8); err != nil {
			t.Errorf("%v: %v", h, err)
		}
	}
}

// helloOracle is the error a Hello must be refused with (nil: accepted), from the rules
// as the protocol states them: a newer protocol version is ErrProtocolVersion before
// anything else is looked at (the client must learn to upgrade, not what else it got
// wrong); then a stream, at most maxViews valid view names, a stream, a client id and a
// service of at most maxIdentityLen bytes of valid UTF-8, each character printable ASCII
// or a letter or digit beyond it, a resume index of -1 or more, and a topic id that is
// empty or a Kafka topic ID's 16 bytes.
func helloOracle(h *statecastv1.Hello, maxViews int) error {
	if h.GetProtocolVersion() > wire.ProtocolVersion {
		return ErrProtocolVersion
	}
	printable := func(s string) bool {
		if len(s) > maxIdentityLen || !utf8.ValidString(s) {
			return false
		}
		for _, r := range s {
			ascii := r >= ' ' && r <= '~'
			if !ascii && (r < 0x80 || !(unicode.IsLetter(r) || unicode.IsDigit(r))) {
				return false
			}
		}
		return true
	}
	bad := h.GetStream() == "" || !printable(h.GetStream()) || len(h.GetViews()) > maxViews ||
		!printable(h.GetClientId()) || !printable(h.GetService()) ||
		(h.ResumeIndex != nil && h.GetResumeIndex() < -1) ||
		(len(h.GetTopicId()) != 0 && len(h.GetTopicId()) != 16)
	for _, v := range h.GetViews() {
		bad = bad || !record.ValidViewName(v)
	}
	if bad {
		return ErrBadHello
	}
	return nil
}
