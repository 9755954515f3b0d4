package distributor

import (
	"context"

	"github.com/jackc/pgx/v5"
)

// listen LISTENs, on a dedicated connection, to the channels of the stream's views and
// wakes the publisher loop for the views of a notified channel (non-blocking: a full wake
// queue means a poll is coming anyway). The connection is re-opened with backoff.
func (s *stream) listen(ctx context.Context) {
	byChan := map[string][]string{}
	for _, st := range s.order {
		if st.cfg.Listen != "" {
			byChan[st.cfg.Listen] = append(byChan[st.cfg.Listen], st.cfg.Name)
		}
	}
	if len(byChan) == 0 {
		return
	}
	for attempt := 0; ctx.Err() == nil; attempt++ {
		err := func() error {
			conn, err := pgx.Connect(ctx, s.d.cfg.Postgres.DSN)
			if err != nil {
				return err
			}
			defer closeConn(conn)
			for ch := range byChan {
				if _, err := conn.Exec(ctx, "LISTEN "+pgx.Identifier{ch}.Sanitize()); err != nil {
					return err
				}
			}
			attempt = 0
			for {
				n, err := conn.WaitForNotification(ctx)
				if err != nil {
					return err
				}
				for _, v := range byChan[n.Channel] {
					select {
					case s.wakeCh <- v:
					default:
					}
				}
			}
		}()
		if ctx.Err() != nil {
			return
		}
		s.countErr("", "listen", err)
		d := retryWait(attempt)
		s.log.Error("listen connection failed; retrying", "stream", s.cfg.Topic, "err", err, "retry_in", d)
		if !sleepCtx(ctx, d) {
			return
		}
	}
}
