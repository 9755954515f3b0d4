package distributor

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"
)

// twoStatements is a view whose SQL holds a second statement with a visible effect.
const twoStatements = "SELECT 1 AS id; SELECT nextval('s')"

// nextvalRan reports whether sequence s was ever advanced.
func (e *env) nextvalRan() bool {
	e.t.Helper()
	var called bool
	if err := e.db.QueryRow(context.Background(), "SELECT is_called FROM s").Scan(&called); err != nil {
		e.t.Fatal(err)
	}
	return called
}

// TestViewOfTwoStatements: a view whose SQL is two statements refuses the configuration
// (Run ends with ErrConfig naming the view) before anything of it runs, whichever the
// capture: the sequence its second statement would advance was not advanced. With capture
// wal the SQL used to reach CREATE TEMPORARY VIEW through the simple protocol, which ran
// both statements.
func TestViewOfTwoStatements(t *testing.T) {
	for _, capture := range []string{CaptureWAL, CapturePoll} {
		t.Run(capture, func(t *testing.T) {
			e := newEnv(t)
			e.createItems()
			e.exec("CREATE SEQUENCE s")
			views := []ViewConfig{{Name: "good", SQL: itemsSQL, Key: []string{"id"}}, {Name: "bad", SQL: twoStatements, Key: []string{"id"}}}
			cfg := e.config(views...)
			if capture == CaptureWAL {
				cfg = e.walConfig(views...)
			}
			r := start(t, cfg)
			select {
			case <-r.finished:
			case <-time.After(60 * time.Second):
				t.Fatal("Run goes on with a view of two statements")
			}
			r.stopped = true
			if !errors.Is(r.err, ErrConfig) || !strings.Contains(r.err.Error(), `view "bad": its SQL is more than one statement`) {
				t.Errorf("Run: %v, want ErrConfig naming the view", r.err)
			}
			if e.nextvalRan() {
				t.Error("the view's second statement ran")
			}
		})
	}
}

// TestCheckDatabaseTwoStatements: cachectl validate -connect reports the view of two
// statements as such, without running either.
func TestCheckDatabaseTwoStatements(t *testing.T) {
	e := newEnv(t)
	e.exec("CREATE SEQUENCE s")
	for _, cfg := range []Config{e.config(ViewConfig{Name: "bad", SQL: twoStatements, Key: []string{"id"}}),
		e.walConfig(ViewConfig{Name: "bad", SQL: twoStatements, Key: []string{"id"}})} {
		c, err := CheckDatabase(context.Background(), cfg)
		if err != nil {
			t.Fatal(err)
		}
		if p := c.Streams[0].Views[0].Problems; len(p) != 1 || !strings.Contains(p[0], "more than one statement") {
			t.Errorf("%s: problems %q, want the two statements named", cfg.Streams[0].Capture, p)
		}
	}
	if e.nextvalRan() {
		t.Error("the view's second statement ran")
	}
}
