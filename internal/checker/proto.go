package checker

import (
	statecastv1 "github.com/statecast/statecast/schemas/gen/statecast/v1"
)

// HelloMsg records a Hello as sent on the wire (client id = target).
func (c *Checker) HelloMsg(h *statecastv1.Hello) {
	var resume *int64
	if h.ResumeIndex != nil {
		r := h.GetResumeIndex()
		resume = &r
	}
	c.Hello(h.GetClientId(), h.GetViews(), resume)
}

// Response records one frame received by target. Nil and unknown frames are ignored.
func (c *Checker) Response(target string, r *statecastv1.SubscribeResponse) {
	switch m := r.GetMsg().(type) {
	case *statecastv1.SubscribeResponse_Batch:
		es := m.Batch.GetEntries()
		out := make([]Entry, len(es))
		for i, e := range es {
			out[i] = EntryOf(e)
		}
		c.Batch(target, out)
	case *statecastv1.SubscribeResponse_Progress:
		c.Progress(target, m.Progress.GetIndex())
	case *statecastv1.SubscribeResponse_SnapshotBegin:
		c.SnapshotBegin(target, m.SnapshotBegin.GetIndex(), m.SnapshotBegin.GetViews())
	case *statecastv1.SubscribeResponse_SnapshotEnd:
		c.SnapshotEnd(target, m.SnapshotEnd.GetIndex())
	case *statecastv1.SubscribeResponse_ResyncRequired:
		c.Resync(target, m.ResyncRequired.GetReason().String()+": "+m.ResyncRequired.GetDetail())
	}
}

// EntryOf converts a wire entry.
func EntryOf(e *statecastv1.Entry) Entry {
	return Entry{
		Index:     e.GetIndex(),
		Key:       string(e.GetKey()),
		View:      e.GetView(),
		Kind:      kindName(e.GetKind()),
		Tombstone: e.GetTombstone(),
	}
}

func kindName(k statecastv1.Kind) string {
	switch k {
	case statecastv1.Kind_KIND_EPOCH_BEGIN:
		return KindEpochBegin
	case statecastv1.Kind_KIND_EPOCH_END:
		return KindEpochEnd
	case statecastv1.Kind_KIND_POLL:
		return KindPoll
	case statecastv1.Kind_KIND_POSITION:
		return KindPosition
	default:
		return KindRow
	}
}
