package player

import (
	"slices"

	"google.golang.org/protobuf/proto"

	"github.com/statecast/statecast/schemas/gen/statecast/v1"
	"github.com/statecast/statecast/schemas/record"
)

// Position entries go to every target (they belong to the stream), but their value may
// name views: the stale list, the views whose rows do not follow the position. A target
// limited to some views (its grant, or the views it asked for) must not learn the names of
// the others, so such an entry is re-made for it with the stale list cut to its views.
// Stale lists are rare (a view stopped by a bad row) and short: the entry is re-made at
// each send rather than kept per target.

// staleOf returns the stale views of a position record's value (nil when none, or when
// the value does not parse: the client reports that entry as it is).
func staleOf(value []byte) []string {
	p, err := record.ParsePosition(value)
	if err != nil {
		return nil
	}
	return p.Stale
}

// visibleTo returns batch as target t may see it: the same slice unless a position entry
// names a view outside t's views, in which case a copy with that entry re-made.
func (t *target) visibleTo(batch []*item) []*item {
	if t.views == nil {
		return batch
	}
	var out []*item
	for i, it := range batch {
		if len(it.stale) == 0 || t.seesAll(it.stale) {
			continue
		}
		if out == nil {
			out = slices.Clone(batch)
		}
		out[i] = it.withStale(slices.DeleteFunc(slices.Clone(it.stale), func(v string) bool { return !t.views.has(v) }))
	}
	if out == nil {
		return batch
	}
	return out
}

func (t *target) seesAll(views []string) bool {
	for _, v := range views {
		if !t.views.has(v) {
			return false
		}
	}
	return true
}

// withStale returns a copy of the position entry it whose value lists stale as its stale
// views.
func (it *item) withStale(stale []string) *item {
	var e statecastv1.Entry
	if err := proto.Unmarshal(it.wire, &e); err != nil {
		panic("player: an entry the player marshalled does not unmarshal: " + err.Error())
	}
	p, err := record.ParsePosition(e.Value)
	if err != nil {
		panic("player: a position entry with stale views does not parse: " + err.Error())
	}
	p.Stale = stale
	if len(stale) == 0 {
		p.Stale = nil
	}
	e.Value = p.Marshal()
	out := entryItem(&e)
	out.index, out.dispatched = it.index, it.dispatched
	return out
}
