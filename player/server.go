package player

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync/atomic"
	"unicode"
	"unicode/utf8"

	"github.com/IBM/sarama"

	"github.com/statecast/statecast/schemas/gen/statecast/v1"
	"github.com/statecast/statecast/schemas/record"
	"github.com/statecast/statecast/schemas/wire"
)

// service implements statecastv1.PlayerServer.
type service struct {
	statecastv1.UnimplementedPlayerServer
	p    *Player
	anon atomic.Int64
}

// Subscribe is the handler of one target's stream. It reads the Hello, opens the target
// (open: validated, authorized, admitted) and serves it (target.serve): this goroutine
// then waits, parked, while the target's receiver and its senders run in goroutines of
// their own. It returns when the target is suspended, ending the stream with the status
// of why (StatusTable).
func (sv *service) Subscribe(srv statecastv1.Player_SubscribeServer) error {
	req, err := srv.Recv()
	if err != nil {
		return toStatus(err)
	}
	hello := req.GetHello()
	if hello == nil {
		return toStatus(fmt.Errorf("%w: the first message must be Hello", ErrBadHello))
	}
	t, release, err := sv.open(srv.Context(), principalFrom(srv.Context()), hello, true)
	if err != nil {
		return toStatus(err)
	}
	defer release()
	return toStatus(t.serve(srv))
}

// open is what a Hello goes through, on a Subscribe stream or a channel of a
// SubscribeMany stream: it validates the Hello, waits until the stream is ready (a stream
// that cannot be served refuses it with Unavailable, naming why), authorizes it, compiles
// its selections and admits the target (stream.admit). release removes the target from
// its stream and gives back its place in the principal's limit, once it has ended.
// ownStack: compile the selections on a goroutine of their own (onOwnStack), for a
// caller whose goroutine then lives as long as the target.
func (sv *service) open(ctx context.Context, pr Principal, hello *statecastv1.Hello, ownStack bool) (t *target, release func(), err error) {
	p := sv.p
	if err := validateHello(hello, p.cfg.MaxHelloViews); err != nil {
		return nil, nil, err
	}
	if err := checkReceiveLimit(hello, p.cfg.MaxRecordBytes); err != nil {
		p.log.Warn("subscribe refused", "stream", hello.GetStream(), "client_id", hello.GetClientId(), "err", err)
		return nil, nil, err
	}
	// Authorization first: a principal learns nothing of a stream or view it may not read,
	// not even whether it exists.
	if err := p.access.authorize(pr, hello.GetStream(), hello.GetViews()); err != nil {
		p.log.Warn("subscribe refused", "principal", pr.String(), "stream", hello.GetStream(), "err", err)
		return nil, nil, err
	}
	s := p.streams[hello.GetStream()]
	if s == nil {
		return nil, nil, fmt.Errorf("%w: %q", ErrUnknownStream, hello.GetStream())
	}
	if err := s.waitServing(ctx); err != nil {
		if errors.Is(err, ErrStreamUnavailable) {
			p.log.Warn("subscribe refused", "stream", s.cfg.Name, "client_id", hello.GetClientId(), "err", err)
		}
		return nil, nil, err
	}
	if err := s.checkViews(hello.GetViews()); err != nil {
		return nil, nil, err
	}
	id := identity{principal: pr, instance: hello.GetClientId(), service: hello.GetService()}
	if id.instance == "" {
		id.instance = "anonymous-" + strconv.FormatInt(sv.anon.Add(1), 10)
	}
	if id.service == "" {
		// A client that predates the service field names its service in client_id.
		id.service = hello.GetClientId()
	}
	mandatory, err := p.access.mandatory(pr, hello.GetStream(), hello.GetViews())
	if err != nil {
		p.log.Warn("subscribe refused", "principal", pr.String(), "stream", hello.GetStream(), "err", err)
		return nil, nil, err
	}
	var sels map[string]*selection
	if ownStack {
		onOwnStack(func() { sels, err = s.selections(hello, mandatory) })
	} else {
		sels, err = s.selections(hello, mandatory)
	}
	if err != nil {
		p.log.Warn("subscribe refused", "principal", pr.String(), "stream", hello.GetStream(), "err", err)
		return nil, nil, err
	}
	// A reconnect of an instance whose old target still counts replaces it: it is not
	// refused for the slot its own old target holds.
	counted := p.limits.acquireTarget(pr.Name)
	if !counted && !s.hasClient(id.key()) {
		err := fmt.Errorf("%w: principal %q has %d targets (max_targets_per_principal)", ErrPrincipalLimit, pr, p.cfg.MaxTargetsPerPrincipal)
		p.log.Warn("subscribe refused", "principal", pr.String(), "stream", hello.GetStream(), "service", id.service, "err", err)
		return nil, nil, err
	}
	t, err = s.admit(id, hello, sels)
	if err != nil {
		if counted {
			p.limits.releaseTarget(pr.Name)
		}
		return nil, nil, err
	}
	return t, func() {
		s.remove(t)
		if counted {
			p.limits.releaseTarget(pr.Name)
		}
	}, nil
}

// onOwnStack runs f on a goroutine of its own and waits for it. The handler's goroutine
// lives, parked, as long as its target, and a collection shrinks a stack only by halves
// while under a quarter of it is in use: a deep call made on it (compiling CEL filters
// needs tens of kilobytes) would leave every selecting target with a stack several times
// what it needs while parked. The stack f grows ends with f's goroutine.
func onOwnStack(f func()) {
	done := make(chan struct{})
	go func() {
		defer close(done)
		f()
	}()
	<-done
}

// checkReceiveLimit refuses a client that could not receive the largest record frame the
// player serves: without it the client's stream would end (ResourceExhausted) on such a
// record at every attempt. A client that says nothing (0) predates the field.
func checkReceiveLimit(h *statecastv1.Hello, maxRecordBytes int) error {
	limit := int64(h.GetMaxMessageBytes())
	if limit == 0 || limit >= int64(maxRecordBytes)+RecordFrameRoom {
		return nil
	}
	return fmt.Errorf("%w: stream %q: the client receives messages of at most %d bytes, and a record's frame may take %d (max_record_bytes %d + %d): raise the client's limit (cacheclient Config.MaxReceiveBytes) to at least %d, or lower the player's max_record_bytes to %d",
		ErrReceiveLimit, h.GetStream(), limit, int64(maxRecordBytes)+RecordFrameRoom, maxRecordBytes, RecordFrameRoom,
		int64(maxRecordBytes)+RecordFrameRoom, limit-RecordFrameRoom)
}

// identity is who a target is: its principal, its service (shared by the replicas of a
// service: the metrics' label) and its instance id (unique per process). A target is
// known by its principal and instance id: only a reconnect of the same instance replaces
// it, and a principal can never replace another's target.
type identity struct {
	principal Principal
	service   string
	instance  string
}

// key is the target's key in the stream's maps.
func (id identity) key() string { return id.principal.Name + "\x00" + id.instance }

// maxIdentityLen bounds the stream, client id and service names a client sends, in bytes:
// they reach logs, the status page and (the service) metric labels.
const maxIdentityLen = 256

// validName reports whether s is a name a client may send: at most maxIdentityLen bytes of
// printable ASCII (space included) and letters and digits of other scripts. Everything
// else is refused: control characters (U+0085 is one), format characters — bidirectional
// overrides (U+202E) that make a log line read backwards, zero-width characters and
// byte-order marks that make two names look alike —, line and paragraph separators, and
// invalid UTF-8.
func validName(s string) bool {
	if len(s) > maxIdentityLen || !utf8.ValidString(s) {
		return false
	}
	for _, r := range s {
		switch {
		case r >= 0x20 && r < 0x7f:
		case r >= 0x80 && (unicode.IsLetter(r) || unicode.IsDigit(r)):
		default:
			return false
		}
	}
	return true
}

func validateHello(h *statecastv1.Hello, maxViews int) error {
	if v := h.GetProtocolVersion(); v > wire.ProtocolVersion {
		return fmt.Errorf("%w: the client speaks protocol version %d, this player at most %d: upgrade the players before the clients",
			ErrProtocolVersion, v, wire.ProtocolVersion)
	}
	if h.GetStream() == "" {
		return fmt.Errorf("%w: empty stream", ErrBadHello)
	}
	// The names are checked before anything logs them; the error never repeats them.
	if !validName(h.GetStream()) {
		return fmt.Errorf("%w: stream: at most %d bytes of letters, digits and printable ASCII", ErrBadHello, maxIdentityLen)
	}
	if len(h.GetViews()) > maxViews {
		return fmt.Errorf("%w: %d views, at most %d (max_hello_views)", ErrBadHello, len(h.GetViews()), maxViews)
	}
	for _, f := range []struct{ name, v string }{{"client_id", h.GetClientId()}, {"service", h.GetService()}} {
		if !validName(f.v) {
			return fmt.Errorf("%w: %s: at most %d bytes of letters, digits and printable ASCII", ErrBadHello, f.name, maxIdentityLen)
		}
	}
	for _, v := range h.GetViews() {
		if !record.ValidViewName(v) {
			return fmt.Errorf("%w: bad view name %q", ErrBadHello, v)
		}
	}
	if h.ResumeIndex != nil && h.GetResumeIndex() < -1 {
		return fmt.Errorf("%w: negative resume index %d", ErrBadHello, h.GetResumeIndex())
	}
	if n := len(h.GetTopicId()); n != 0 && n != len(sarama.Uuid{}) {
		return fmt.Errorf("%w: topic_id of %d bytes (a Kafka topic ID has %d)", ErrBadHello, n, len(sarama.Uuid{}))
	}
	return nil
}
