package distributor

import "github.com/statecast/statecast/distributor/internal/capture"

// A captured value (a base table's identity or a column a view maps it by) longer than
// the record size limit is not copied by the receiver (capture.ReceiverConfig
// MaxValueBytes): it could be in no record, and a copy of a value of hundreds of MiB
// would cost its size again. The change lists it (capture.Change.Oversize); the views
// that map the table through its column re-read the table in full, off the cycles
// (wal_behind.go), and that read refuses a row it would make too large before encoding
// it (rowCodec.encode), which stops the view with an error that names the column, its
// size and the limit. A view whose rows do not hold the value reads on.

// readsOversize reports whether one of v's mappings of c's table reads a value the
// receiver refused to copy (longer than the record size limit).
func (v *walView) readsOversize(c capture.Change) bool {
	if len(c.Oversize) == 0 {
		return false
	}
	for _, r := range v.routes[c.Rel] {
		for _, p := range r.pos {
			for _, o := range c.Oversize {
				if p == o.Index {
					return true
				}
			}
		}
	}
	return false
}

// logOversize logs each value of t's changes that the receiver refused to copy.
func (s *stream) logOversize(t *capture.Txn) {
	for _, c := range t.Changes {
		for _, o := range c.Oversize {
			s.log.Warn("a captured value is longer than the record size limit: not captured; the views that map its table through this column re-read it in full",
				"stream", s.cfg.Topic, "table", o.Table, "column", o.Column, "bytes", o.Bytes, "limit", s.cfg.maxBytes)
		}
	}
}
