package player

import (
	"fmt"
	"strconv"
	"sync/atomic"

	"github.com/IBM/sarama"

	"github.com/statecast/statecast/schemas/gen/statecast/v1"
	"github.com/statecast/statecast/schemas/record"
)

// service implements statecastv1.PlayerServer.
type service struct {
	statecastv1.UnimplementedPlayerServer
	p    *Player
	anon atomic.Int64
}

// Subscribe is the handler of one target's stream. It reads and validates the Hello,
// waits until the stream is ready, admits the target (stream.admit) and serves it
// (target.serve): this goroutine is then the target's health checker, while its sender and
// its receiver run in goroutines of their own. It returns when the target is suspended,
// ending the stream with the status of why (StatusTable).
func (sv *service) Subscribe(srv statecastv1.Player_SubscribeServer) error {
	p := sv.p
	req, err := srv.Recv()
	if err != nil {
		return toStatus(err)
	}
	hello := req.GetHello()
	if hello == nil {
		return toStatus(fmt.Errorf("%w: the first message must be Hello", ErrBadHello))
	}
	if err := validateHello(hello); err != nil {
		return toStatus(err)
	}
	s := p.streams[hello.GetStream()]
	if s == nil {
		return toStatus(fmt.Errorf("%w: %q", ErrUnknownStream, hello.GetStream()))
	}
	select {
	case <-s.ready:
	case <-srv.Context().Done():
		return toStatus(srv.Context().Err())
	case <-p.ctx.Done():
		return toStatus(ErrClosed)
	}
	id := hello.GetClientId()
	if id == "" {
		id = "anonymous-" + strconv.FormatInt(sv.anon.Add(1), 10)
	}
	t, err := s.admit(id, hello)
	if err != nil {
		return toStatus(err)
	}
	defer s.remove(t)
	return toStatus(t.serve(srv))
}

func validateHello(h *statecastv1.Hello) error {
	if h.GetStream() == "" {
		return fmt.Errorf("%w: empty stream", ErrBadHello)
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
