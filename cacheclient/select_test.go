package cacheclient

import (
	"errors"
	"testing"

	statecastv1 "github.com/statecast/statecast/schemas/gen/statecast/v1"
	"github.com/statecast/statecast/schemas/wire"
)

// TestHelloSelections: a Hello without selections says protocol version 1 (every player
// serves it as before); one with selections carries them and says wire.ProtocolVersion,
// which an older player refuses instead of ignoring them.
func TestHelloSelections(t *testing.T) {
	c, err := New(Config{Addresses: []string{"127.0.0.1:1"}, Stream: "s", Service: "t"})
	if err != nil {
		t.Fatal(err)
	}
	dec := func(string, []byte) (int, error) { return 0, nil }
	if _, err := Register(c, "a", dec); err != nil {
		t.Fatal(err)
	}
	b, err := Register(c, "b", dec, WithFilter(`g == 1`), WithShard(2, 4), WithColumns("g", "id"))
	if err != nil {
		t.Fatal(err)
	}
	if got := b.Selection().String(); got != "g == 1 shard 2/4 columns g,id" {
		t.Fatalf("Selection().String() = %q", got)
	}
	var h statecastv1.Hello
	c.helloSelections(&h)
	if h.GetProtocolVersion() != wire.ProtocolVersion || len(h.GetSelections()) != 1 {
		t.Fatalf("with a selection: version %d, selections %v", h.GetProtocolVersion(), h.GetSelections())
	}
	s := h.GetSelections()[0]
	if s.GetView() != "b" || s.GetFilter() != "g == 1" || s.GetShardIndex() != 2 || s.GetShardCount() != 4 || len(s.GetColumns()) != 2 {
		t.Fatalf("selection %v", s)
	}
	// Reselect before Start changes the selection without a resubscription.
	if err := b.Reselect(); err != nil || !b.Selection().IsZero() || c.reselected.Load() {
		t.Fatalf("Reselect to the whole view: %v, %v, resubscribe %v", err, b.Selection(), c.reselected.Load())
	}
	h = statecastv1.Hello{}
	c.helloSelections(&h)
	if h.GetProtocolVersion() != 1 || len(h.GetSelections()) != 0 {
		t.Fatalf("without selections: version %d, selections %v", h.GetProtocolVersion(), h.GetSelections())
	}
	for _, o := range [][]ViewOption{{WithShard(4, 4)}, {WithShard(1, 0)}, {WithColumns("")}} {
		if _, err := Register(c, "x", dec, o...); !errors.Is(err, ErrConfig) {
			t.Errorf("Register with a bad selection: %v, want ErrConfig", err)
		}
	}
}
