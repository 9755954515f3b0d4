package cacheclient

import "slices"

// Change handlers across a restart. The state file must never hold a change that a
// handler has not completed: the process may stop with changes queued for the handlers
// (Close drops them), and a restart that resumed after them would never hand them over —
// a delete or an update lost for good. So the persister writes the last publication
// (Cut) whose changes every handler has completed, not the last one applied: a restart
// resumes from it, hands the restored state to the handlers as creates, and receives
// the changes after it again, the unhandled ones included.
//
// The connection goroutine (and the load goroutine, before it) records after each hand-
// over of changes a mark: the Cut just published and, per handler, how many changes it
// was handed up to then (its submitted count). A mark is complete once every handler's
// done watermark has reached those counts; the persister takes the newest complete mark
// and forgets the older ones. Marks with the same counts (publications that handed no
// change over) keep only the newest Cut, so at most one mark per change in the handlers'
// queues is kept; a Cut shares all but the paths its later changes copied with the
// current versions.

// handledMark is a publication and the changes handed to the handlers up to it.
type handledMark struct {
	cut  *Cut
	need []int64 // per c.handlers: changes submitted when cut was published
}

// markHandedOver records the last publication once its changes were handed to the
// handlers (after flushChanges). No-op without handlers.
func (c *Client) markHandedOver() {
	if len(c.handlers) == 0 {
		return
	}
	need := make([]int64, len(c.handlers))
	for i, h := range c.handlers {
		need[i] = h.submittedCount()
	}
	cut := c.cut.Load()
	c.marksMu.Lock()
	defer c.marksMu.Unlock()
	if n := len(c.marks); n > 0 && slices.Equal(c.marks[n-1].need, need) {
		c.marks[n-1].cut = cut
		return
	}
	c.marks = append(c.marks, handledMark{cut: cut, need: need})
}

// handledCut returns the newest publication whose changes every handler completed (the
// last publication without handlers), and drops the marks before it. nil: none yet.
func (c *Client) handledCut() *Cut {
	if len(c.handlers) == 0 {
		return c.cut.Load()
	}
	done := make([]int64, len(c.handlers))
	for i, h := range c.handlers {
		done[i] = h.doneCount()
	}
	c.marksMu.Lock()
	defer c.marksMu.Unlock()
	best := -1
	for i, m := range c.marks {
		complete := true
		for j, n := range m.need {
			if done[j] < n {
				complete = false
				break
			}
		}
		if !complete {
			break // later marks need at least as much
		}
		best = i
	}
	if best < 0 {
		return nil
	}
	cut := c.marks[best].cut
	c.marks = slices.Delete(c.marks, 0, best) // the complete mark stays: the next persist may need it again
	return cut
}

// dropMarks forgets every mark: after a failed epoch check no publication before the
// repair is trusted enough to be written.
func (c *Client) dropMarks() {
	c.marksMu.Lock()
	c.marks = nil
	c.marksMu.Unlock()
}
