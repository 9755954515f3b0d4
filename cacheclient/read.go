package cacheclient

// Cut is one publication of every view of a client: the versions of all its views that
// were published together, with the stream position and the source position they reflect.
// A source transaction (schemas/README.md) is either wholly in a Cut or not at all, in
// every view: read several views through one Cut when their contents must agree.
//
// A Cut is immutable and safe for concurrent use. It keeps its versions alive: take a new
// one for each request rather than holding one for long.
type Cut struct {
	c        *Client
	position int64
	topic    string // the topic ID position is an offset of
	src      sourceState
	states   []any         // per view slot: its published *viewState[T]
	next     chan struct{} // closed when the next Cut is published (WaitFor)
}

// Read returns the client's last publication of every view: one atomic load. Read a view
// in it with [View.In]:
//
//	cut := c.Read()
//	ev, ok := events.In(cut).Get(key)
//	mk := markets.In(cut).ByIndex("event", key)
//
// Reads of a single view (View.Get, View.Version, …) are as atomic within that view, and
// cheaper; two such reads of two views may see different publications.
func (c *Client) Read() *Cut { return c.cut.Load() }

// Position returns the stream position of the Cut: every view reflects every record up to
// it (-1 before the first publication).
func (r *Cut) Position() int64 { return r.position }

// SourcePosition returns the source position the Cut reflects: the LSN of the last
// position record applied (0 when none carried one). See Client.WaitFor.
func (r *Cut) SourcePosition() LSN {
	if !r.src.hasLSN {
		return 0
	}
	return r.src.lsn
}

// In returns the version of v in cut. cut must come from v's client (Client.Read); In
// panics otherwise. Before Start (no view published yet) it returns v's current version.
func (v *View[T]) In(cut *Cut) *Version[T] {
	if cut.c != v.c {
		panic("cacheclient: View.In with a Cut of another client")
	}
	if v.slot < len(cut.states) {
		return &Version[T]{v: v, s: cut.states[v.slot].(*viewState[T])}
	}
	return &Version[T]{v: v, s: v.state.Load()}
}

// publish publishes the working version of every view at stream position pos, with the
// working source state, as one Cut; then the applied position. Readers of a single view
// switch to its new version with the view's own atomic store, readers of a Cut to all of
// them at once. c.applyMu held.
func (c *Client) publish(pos int64) {
	cut := &Cut{c: c, position: pos, topic: c.topic, src: c.wsrc, states: make([]any, len(c.views)), next: make(chan struct{})}
	for i, v := range c.views {
		cut.states[i] = v.commit(pos)
	}
	old := c.cut.Swap(cut)
	c.applied.Store(pos)
	close(old.next)
}

// rollback drops every view's working version and the working source state: what was
// staged since the last publication. c.applyMu held.
func (c *Client) rollback() {
	for _, v := range c.views {
		v.rollback()
	}
	c.wsrc = c.cut.Load().src
}
