package cacheclient

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	statecastv1 "github.com/statecast/statecast/schemas/gen/statecast/v1"
	"github.com/statecast/statecast/schemas/wire"
)

// Selection is the part of a view a client subscribes to: the rows that pass Filter and
// fall in shard ShardIndex of ShardCount. The zero Selection is the whole view. The player
// evaluates it (schemas/proto/README.md, "Selections"): the view holds only those rows, and
// its indexes, handlers, WaitReady and WaitFor work on them; a row that stops passing is
// deleted from the view (its change handlers see a delete).
type Selection struct {
	// Filter is a CEL expression over the view's columns (each a variable named as the
	// column) that yields a bool, e.g. `tenant_id == "t1" && region in ["eu", "us"]`.
	// Empty: every row. The player refuses a filter that does not compile or names a
	// column the view does not have: the client then stops (see ErrInvalid).
	Filter string
	// ShardIndex of ShardCount: the rows whose key hashes to ShardIndex (xxhash64 of the
	// record key, mod ShardCount; record.Shard). ShardCount 0: no sharding.
	ShardIndex, ShardCount uint32
	// Columns, when not empty, are the columns the view receives of each row: the
	// decoder sees a value with only those members (the filter sees every column). The
	// player refuses a column the view does not have.
	Columns []string
}

// IsZero reports whether s is the whole view.
func (s Selection) IsZero() bool {
	return s.Filter == "" && s.ShardIndex == 0 && s.ShardCount == 0 && len(s.Columns) == 0
}

// String is the selection's text, as the state file and the status pages show it ("" for
// the whole view).
func (s Selection) String() string {
	if s.IsZero() {
		return ""
	}
	out := s.Filter
	if s.ShardCount > 0 {
		if out != "" {
			out += " "
		}
		out += "shard " + strconv.FormatUint(uint64(s.ShardIndex), 10) + "/" + strconv.FormatUint(uint64(s.ShardCount), 10)
	}
	if len(s.Columns) > 0 {
		if out != "" {
			out += " "
		}
		out += "columns " + strings.Join(slices.Sorted(slices.Values(s.Columns)), ",")
	}
	return out
}

func (s Selection) validate(view string) error {
	switch {
	case s.ShardCount > 0 && s.ShardIndex >= s.ShardCount:
		return fmt.Errorf("%w: view %q: shard index %d is not below the shard count %d", ErrConfig, view, s.ShardIndex, s.ShardCount)
	case s.ShardCount == 0 && s.ShardIndex > 0:
		return fmt.Errorf("%w: view %q: shard index %d without a shard count", ErrConfig, view, s.ShardIndex)
	case len(s.Columns) > 0 && slices.Contains(s.Columns, ""):
		return fmt.Errorf("%w: view %q: an empty column name", ErrConfig, view)
	case len(s.Filter) > maxFilterBytes:
		return fmt.Errorf("%w: view %q: a filter of %d bytes, the player takes at most %d", ErrConfig, view, len(s.Filter), maxFilterBytes)
	}
	return nil
}

// maxFilterBytes is the player's bound on a filter's text.
const maxFilterBytes = 4096

// ViewOption configures a view at Register.
type ViewOption func(*Selection)

// WithFilter subscribes the view to the rows that pass the CEL expression expr (see
// Selection.Filter).
func WithFilter(expr string) ViewOption { return func(s *Selection) { s.Filter = expr } }

// WithColumns subscribes the view to these columns of each row only (see
// Selection.Columns): the client stores, and its decoder sees, only them.
func WithColumns(columns ...string) ViewOption {
	return func(s *Selection) { s.Columns = slices.Clone(columns) }
}

// WithShard subscribes the view to shard index of count (see Selection.ShardIndex): a fleet
// of count replicas, each with its own index, holds each row exactly once.
func WithShard(index, count uint32) ViewOption {
	return func(s *Selection) { s.ShardIndex, s.ShardCount = index, count }
}

// Selection returns what the view subscribes to (the zero Selection: the whole view).
func (v *View[T]) Selection() Selection {
	if s := v.sel.Load(); s != nil {
		c := *s
		c.Columns = slices.Clone(s.Columns)
		return c
	}
	return Selection{}
}

// selection is the view's Hello.selections entry (nil: the whole view).
func (v *View[T]) selection() *statecastv1.Selection {
	s := v.sel.Load()
	if s == nil || s.IsZero() {
		return nil
	}
	return &statecastv1.Selection{View: v.name, Filter: s.Filter, ShardIndex: s.ShardIndex, ShardCount: s.ShardCount, Columns: s.Columns}
}

// Reselect changes what the view subscribes to while the client runs: a resubscription
// without a restart. The client ends its stream and subscribes again without a resume
// index (a resume index is valid only with the selections it was read with), so every
// view is replaced, atomically, by the snapshot that follows; until then the views keep
// what they held. Reads, indexes and handlers see the new subset from that snapshot on.
func (v *View[T]) Reselect(opts ...ViewOption) error {
	var s Selection
	for _, o := range opts {
		o(&s)
	}
	if err := s.validate(v.name); err != nil {
		return err
	}
	if s.String() == v.Selection().String() {
		return nil
	}
	v.sel.Store(&s)
	v.c.mu.Lock()
	started := v.c.started
	v.c.mu.Unlock()
	if started {
		v.c.resubscribe()
	}
	return nil
}

// resubscribe makes the connection goroutine end its stream and subscribe again for a
// snapshot (Reselect).
func (c *Client) resubscribe() {
	c.reselected.Store(true)
	if f := c.endStream.Load(); f != nil {
		(*f)()
	}
}

// helloSelections sets the Hello's selections, and the protocol version it needs: a Hello
// without selections is one a player of version 1 serves as before, so the client says 1
// and keeps working with players that predate selections; with selections it says
// wire.ProtocolVersion, which an older player refuses rather than ignore them.
func (c *Client) helloSelections(h *statecastv1.Hello) {
	h.ProtocolVersion = 1
	for _, v := range c.views {
		if s := v.selection(); s != nil {
			h.Selections = append(h.Selections, s)
			h.ProtocolVersion = wire.ProtocolVersion
		}
	}
}
