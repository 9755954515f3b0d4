package checker

import "sort"

// truth indexes the records of the topic for Check.
type truth struct {
	known   bool
	byIndex map[int64]Record
	sorted  []Record          // by index
	lastRow map[string]Record // latest row record (or tombstone) per key
	lastPos *Record           // latest position record
}

func newTruth(recs []Record) *truth {
	t := &truth{known: recs != nil, byIndex: make(map[int64]Record, len(recs)), lastRow: map[string]Record{}}
	t.sorted = append(t.sorted, recs...)
	sort.Slice(t.sorted, func(i, j int) bool { return t.sorted[i].Index < t.sorted[j].Index })
	for _, r := range t.sorted {
		t.byIndex[r.Index] = r
		switch kindOf(r.Kind) {
		case KindRow:
			t.lastRow[r.Key] = r
		case KindPosition:
			t.lastPos = &r
		}
	}
	return t
}

func kindOf(k string) string {
	if k == "" {
		return KindRow
	}
	return k
}

// end is the last index of the truth, -1 when empty.
func (t *truth) end() int64 {
	if len(t.sorted) == 0 {
		return -1
	}
	return t.sorted[len(t.sorted)-1].Index
}

// between returns the records of views (position records included: they belong to every
// subscription) with from < index < to (to inclusive when incl).
func (t *truth) between(views viewSet, from, to int64, incl bool) []Record {
	i := sort.Search(len(t.sorted), func(i int) bool { return t.sorted[i].Index > from })
	var out []Record
	for ; i < len(t.sorted); i++ {
		r := t.sorted[i]
		if r.Index > to || (!incl && r.Index == to) {
			break
		}
		if views.wants(r) {
			out = append(out, r)
		}
	}
	return out
}

// viewSet is a subscription; nil means all views.
type viewSet map[string]bool

func newViewSet(views []string) viewSet {
	if len(views) == 0 {
		return nil
	}
	s := viewSet{}
	for _, v := range views {
		s[v] = true
	}
	return s
}

func (s viewSet) has(v string) bool { return s == nil || s[v] }

// wants reports whether a target subscribed to s receives r: a record of one of its views
// or a position record.
func (s viewSet) wants(r Record) bool { return s.has(r.View) || kindOf(r.Kind) == KindPosition }

// wantsEntry is wants for a delivered entry.
func (s viewSet) wantsEntry(e Entry) bool { return s.has(e.View) || kindOf(e.Kind) == KindPosition }
