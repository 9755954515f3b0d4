package cacheclient

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// LSN is a PostgreSQL WAL position (pg_lsn): the source position of a stream captured
// from the WAL (schemas/README.md, "Source transactions and the source position").
type LSN uint64

// String returns PostgreSQL's text form of the position: two hexadecimal numbers, the high
// and the low 32 bits, "16/B374D848".
func (l LSN) String() string { return fmt.Sprintf("%X/%X", uint32(l>>32), uint32(l)) }

// ParseLSN parses PostgreSQL's text form of a WAL position ("16/B374D848", as
// pg_current_wal_insert_lsn() returns it; hexadecimal digits in either case, each half at
// most 8 of them). Its error wraps ErrInvalidLSN.
func ParseLSN(s string) (LSN, error) {
	hi, lo, ok := strings.Cut(s, "/")
	if !ok || !hex32(hi) || !hex32(lo) {
		return 0, fmt.Errorf("%w: %q", ErrInvalidLSN, s)
	}
	h, _ := strconv.ParseUint(hi, 16, 32)
	l, _ := strconv.ParseUint(lo, 16, 32)
	return LSN(h<<32 | l), nil
}

func hex32(s string) bool {
	if len(s) == 0 || len(s) > 8 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !('0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F') {
			return false
		}
	}
	return true
}

// MarshalText writes the position's text form (String).
func (l LSN) MarshalText() ([]byte, error) { return []byte(l.String()), nil }

// UnmarshalText parses a position's text form (ParseLSN).
func (l *LSN) UnmarshalText(b []byte) error {
	v, err := ParseLSN(string(b))
	if err != nil {
		return err
	}
	*l = v
	return nil
}

// sourceState is what the last applied position record said.
type sourceState struct {
	seen   bool     // a position record was applied
	hasLSN bool     // it carried a source position (WAL capture; false: polling)
	lsn    LSN      // the source position, when hasLSN
	stale  []string // the client's views it lists as stale (immutable)
	// behind gives the client's views that follow the stream at an earlier position of
	// their own (re-read off the stream's path), and that position (immutable).
	behind map[string]LSN
}

// at is the position every view of the client reflects: the stream's, or the earliest
// of a view behind it.
func (s *sourceState) at() LSN {
	at := s.lsn
	for _, p := range s.behind {
		at = min(at, p)
	}
	return at
}

// reached reports whether WaitFor(pos) is over in this state, and with which error.
func (s *sourceState) reached(pos LSN) (bool, error) {
	switch {
	case !s.seen:
		return false, nil
	case !s.hasLSN:
		return true, ErrNoSourcePosition
	case s.at() < pos:
		return false, nil
	case len(s.stale) > 0:
		return true, &StaleViewError{View: s.stale[0], Views: slices.Clone(s.stale), Position: s.lsn}
	}
	return true, nil
}

// WaitFor returns nil once every view of the client reflects every commit up to the
// source position pos: the source position of the client's last publication (every
// view's versions published together, see Read) is >= pos, and so is the position of
// each of its views that follows the stream at a position of its own (a view whose
// changes the distributor re-reads in full, off the stream's path). It is read-your-writes: a
// service that wrote to PostgreSQL reads the WAL position after its COMMIT (see the
// package documentation) and waits for it before reading its cache.
//
// It fails with a *StaleViewError (errors.Is ErrStaleView) when the position record that
// reaches pos says one of the client's views does not follow the source position (a view
// the distributor stopped on a bad row: its rows may lack the write); with
// ErrNoSourcePosition when the stream's position records carry no source position (a view
// captured by polling); with a *WaitError when ctx ends first (it matches ctx's error and
// names the last refusal or connection error, as WaitReady's does); with the client's
// refusal once it stopped (Err); and with ErrClosed once the client is closed.
//
// Waiting costs nothing per publication: every waiter sleeps on the same channel, which
// the next publication closes.
func (c *Client) WaitFor(ctx context.Context, pos LSN) error {
	for {
		cut := c.cut.Load()
		if done, err := cut.src.reached(pos); done {
			return err
		}
		select {
		case <-cut.next:
		case <-ctx.Done():
			return c.waitErr("WaitFor", ctx)
		case <-c.closing:
			return ErrClosed
		case <-c.stopped:
			return c.stoppedErr()
		}
	}
}
