package devenv

import (
	"bytes"

	"fmt"
	"io"
	"log/slog"
	"strings"
	"sync"
)

// logSink collects the sportsbook service's log lines (cacheclient's and its OnChange
// handler's) so that the demo prints them at its own checkpoints instead of in the
// middle of the stream's records.
type logSink struct {
	mu    sync.Mutex
	buf   bytes.Buffer
	lines []string
}

func (s *logSink) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.buf.Write(p)
	for {
		i := bytes.IndexByte(s.buf.Bytes(), '\n')
		if i < 0 {
			break
		}
		s.lines = append(s.lines, string(s.buf.Next(i + 1)[:i]))
	}
	return len(p), nil
}

// logger returns a text logger (Info and above, no time) writing into the sink.
func (s *logSink) logger() *slog.Logger {
	return slog.New(slog.NewTextHandler(s, &slog.HandlerOptions{
		ReplaceAttr: func(groups []string, a slog.Attr) slog.Attr {
			if len(groups) == 0 && a.Key == slog.TimeKey {
				return slog.Attr{}
			}
			return a
		},
	}))
}

// take returns the lines collected so far and forgets them.
func (s *logSink) take() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	l := s.lines
	s.lines = nil
	return l
}

// flush writes the collected lines to w, each prefixed; past max lines (max > 0) it
// writes the first ones and a count of the rest.
func (s *logSink) flush(w io.Writer, prefix string, max int) {
	lines := s.take()
	for i, l := range lines {
		if max > 0 && i == max && len(lines) > max+1 {
			fmt.Fprintf(w, "%s… and %d more lines\n", prefix, len(lines)-max)
			return
		}
		fmt.Fprintf(w, "%s%s\n", prefix, strings.TrimPrefix(l, "level="))
	}
}

// count returns how many collected lines contain sub.
func (s *logSink) count(sub string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for _, l := range s.lines {
		if strings.Contains(l, sub) {
			n++
		}
	}
	return n
}
