package devenv

import (
	"bytes"
	"errors"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/statecast/statecast/examples/sportsbook"
)

func TestSummarizeEvent(t *testing.T) {
	d := sportsbook.EventDetail{
		Event: sportsbook.Event{ID: 7, Name: "A v B", Status: "live", Tags: []string{"x"}},
		Markets: []sportsbook.MarketDetail{
			{Market: sportsbook.Market{EventID: 7, MarketID: 71, Competition: "Cup", Market: "Match Odds"},
				Selections: []sportsbook.Selection{{Name: "Home", Price: "1.500"}, {Name: "Away", Price: "2.250"}}},
			{Market: sportsbook.Market{EventID: 7, MarketID: 72, Competition: "Cup", Market: "Goals", Suspended: true}, Selections: []sportsbook.Selection{}},
		},
	}
	want := `       event 7 "A v B" status=live competition="Cup" tags=[x]
         market 71 Match Odds                     Home 1.500 | Away 2.250
         market 72 Goals                SUSPENDED 
`
	if got := summarizeEvent(d); got != want {
		t.Errorf("summarizeEvent:\n%q\nwant\n%q", got, want)
	}
	if got := summarizeEvents([]sportsbook.Event{{ID: 1, Name: "a", Status: "live"}, {ID: 2, Name: "b", Status: "scheduled"}}); got != "1 a (live), 2 b (scheduled)" {
		t.Errorf("summarizeEvents: %q", got)
	}
}

func TestLogSinkFlush(t *testing.T) {
	for _, tc := range []struct {
		name  string
		lines int
		max   int
		want  string
	}{
		{"all", 2, 0, "> INFO msg=m n=0\n> INFO msg=m n=1\n"},
		{"under max", 2, 2, "> INFO msg=m n=0\n> INFO msg=m n=1\n"},
		{"one over max is printed", 3, 2, "> INFO msg=m n=0\n> INFO msg=m n=1\n> INFO msg=m n=2\n"},
		{"cut", 5, 2, "> INFO msg=m n=0\n> INFO msg=m n=1\n> … and 3 more lines\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var s logSink
			log := s.logger()
			for i := range tc.lines {
				log.Info("m", "n", i)
			}
			log.Debug("hidden")
			if n := s.count("msg=m"); n != tc.lines {
				t.Errorf("count = %d", n)
			}
			var b bytes.Buffer
			s.flush(&b, "> ", tc.max)
			if b.String() != tc.want {
				t.Errorf("flush:\n%s\nwant\n%s", b.String(), tc.want)
			}
			if s.count("msg=m") != 0 {
				t.Error("flush kept lines")
			}
		})
	}
}

func TestListenFallsBack(t *testing.T) {
	taken, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer taken.Close()
	lis, moved, err := listen(taken.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer lis.Close()
	if !moved || lis.Addr().String() == taken.Addr().String() || !strings.HasPrefix(lis.Addr().String(), "127.0.0.1:") {
		t.Errorf("listen on a taken port: %s moved=%v", lis.Addr(), moved)
	}
	if _, _, err := listen("no-port"); err == nil {
		t.Error("listen on a bad address: no error")
	}
}

// TestStopWithin: a stop that hangs is reported as ErrStuck after the bound; a stop that
// returns gives its error.
func TestStopWithin(t *testing.T) {
	release := make(chan struct{})
	stopped := make(chan struct{})
	err := stopWithin(func() error { <-release; close(stopped); return nil }, 10*time.Millisecond)
	if !errors.Is(err, ErrStuck) {
		t.Errorf("a hanging stop: %v, want ErrStuck", err)
	}
	close(release)
	<-stopped
	boom := errors.New("boom")
	if err := stopWithin(func() error { return boom }, time.Minute); err != boom {
		t.Errorf("a failing stop: %v", err)
	}
}
