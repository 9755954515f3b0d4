package checker

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
)

// Guarantee names one of the delivery guarantees of docs/architecture.md (Guarantees).
type Guarantee string

// The guarantees the checker reports.
const (
	Ordered   Guarantee = "ordered"
	Unique    Guarantee = "unique"
	Reliable  Guarantee = "reliable"
	Resumable Guarantee = "resumable"
)

// Sentinels matched by errors.Is on the error returned by Check.
var (
	ErrOrdered   = errors.New("checker: ordered violated")
	ErrUnique    = errors.New("checker: unique violated")
	ErrReliable  = errors.New("checker: reliable violated")
	ErrResumable = errors.New("checker: resumable violated")
)

func (g Guarantee) sentinel() error {
	switch g {
	case Ordered:
		return ErrOrdered
	case Unique:
		return ErrUnique
	case Reliable:
		return ErrReliable
	default:
		return ErrResumable
	}
}

// Kind of a record, as in the sc-kind header.
const (
	KindRow        = "row"
	KindEpochBegin = "epoch-begin"
	KindEpochEnd   = "epoch-end"
	KindPoll       = "poll"
	// KindPosition records belong to the stream, not to a view (View ""): every target
	// receives them whatever its views, live and in its snapshot (the latest one).
	KindPosition = "position"
)

// Record is one record of the topic: the ground truth.
type Record struct {
	Index     int64
	Key       string
	View      string // header sc-view
	Kind      string // header sc-kind; "" is treated as KindRow
	Tombstone bool
	Epoch     int64  // header sc-epoch
	Value     []byte // the record's value (nil for a tombstone): what a Selection reads
}

// Selection is a target's choice of the rows of one view (HelloSelect): it reports whether
// a row record (never a tombstone) passes. A test writes it independently of the player's
// filter (plain Go over the record's value), so the checker compares the player with an
// obvious model of the same filter.
type Selection func(r Record) bool

// Entry is one delivered entry, as the target received it. Kind "" means KindRow.
type Entry struct {
	Index     int64
	Key       string
	View      string
	Kind      string
	Tombstone bool
}

// Violation is one broken guarantee.
type Violation struct {
	Guarantee Guarantee
	Target    string
	Session   int // 1-based number of the target's Hello; 0 when not tied to a session
	Detail    string
}

func (v Violation) String() string {
	return fmt.Sprintf("%s: target %q session %d: %s", v.Guarantee, v.Target, v.Session, v.Detail)
}

// Error lists the violations found by Check. errors.Is matches ErrOrdered, ErrUnique,
// ErrReliable and ErrResumable for the guarantees it contains.
type Error struct {
	Violations []Violation
}

func (e *Error) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "checker: %d violation(s)", len(e.Violations))
	for _, v := range e.Violations {
		b.WriteString("\n  ")
		b.WriteString(v.String())
	}
	return b.String()
}

// Is reports whether the error contains a violation of the guarantee of target.
func (e *Error) Is(target error) bool {
	for _, v := range e.Violations {
		if v.Guarantee.sentinel() == target {
			return true
		}
	}
	return false
}

// Has reports whether the error contains a violation of g.
func (e *Error) Has(g Guarantee) bool {
	return slices.ContainsFunc(e.Violations, func(v Violation) bool { return v.Guarantee == g })
}

type eventKind int

const (
	evHello eventKind = iota
	evBatch
	evProgress
	evSnapBegin
	evSnapEnd
	evResync
)

type event struct {
	kind      eventKind
	views     []string
	sels      map[string]Selection
	resume    int64
	hasResume bool
	index     int64
	entries   []Entry
	detail    string
}

type targetLog struct {
	events []event
	gone   bool
}

// Checker records deliveries per target. The zero value is not usable; call New.
type Checker struct {
	mu      sync.Mutex
	targets map[string]*targetLog
	order   []string
	opts    Options
}

// Options tune Check.
type Options struct {
	// AllowCompacted accepts delivered indexes that are absent from the truth (compacted away
	// between delivery and ReadTopic). Off by default: an unknown index is a violation.
	AllowCompacted bool
	// MaxPerTarget caps the violations listed per target and guarantee (default 10); the
	// last listed one says how many were left out.
	MaxPerTarget int
}

// New returns an empty checker.
func New(opts ...Options) *Checker {
	c := &Checker{targets: map[string]*targetLog{}}
	if len(opts) > 0 {
		c.opts = opts[0]
	}
	if c.opts.MaxPerTarget <= 0 {
		c.opts.MaxPerTarget = 10
	}
	return c
}

func (c *Checker) add(target string, ev event) {
	c.mu.Lock()
	defer c.mu.Unlock()
	t := c.targets[target]
	if t == nil {
		t = &targetLog{}
		c.targets[target] = t
		c.order = append(c.order, target)
	}
	t.events = append(t.events, ev)
}

// Hello records the start of a session: the views requested (empty = all) and the resume
// index; resume nil means a new target (snapshot bootstrap expected).
func (c *Checker) Hello(target string, views []string, resume *int64) {
	ev := event{kind: evHello, views: slices.Clone(views)}
	if resume != nil {
		ev.resume, ev.hasResume = *resume, true
	}
	c.add(target, ev)
}

// HelloSelect is Hello for a session that selects rows of some views (sels, by view; the
// other views are received whole). Check then expects, for a selected view: every row
// record that passes delivered as it is; a record that does not pass (or a tombstone)
// delivered as a tombstone of its key at its index when the target held the key before
// it (a move out), and never as a row; snapshots holding exactly the rows that pass; and
// at the end a state of exactly the passing rows. Its epoch-end records (which count the
// whole view) may be left out.
func (c *Checker) HelloSelect(target string, views []string, resume *int64, sels map[string]Selection) {
	ev := event{kind: evHello, views: slices.Clone(views), sels: sels}
	if resume != nil {
		ev.resume, ev.hasResume = *resume, true
	}
	c.add(target, ev)
}

// Batch records a batch the target received (live, or inside a snapshot frame).
func (c *Checker) Batch(target string, entries []Entry) {
	c.add(target, event{kind: evBatch, entries: slices.Clone(entries)})
}

// Progress records a progress frame: "you have everything of your views up to index".
func (c *Checker) Progress(target string, index int64) {
	c.add(target, event{kind: evProgress, index: index})
}

// SnapshotBegin records the start of a snapshot as of index for views (empty = all).
func (c *Checker) SnapshotBegin(target string, index int64, views []string) {
	c.add(target, event{kind: evSnapBegin, index: index, views: slices.Clone(views)})
}

// SnapshotEnd records the end of a snapshot at index.
func (c *Checker) SnapshotEnd(target string, index int64) {
	c.add(target, event{kind: evSnapEnd, index: index})
}

// Resync records a resync-required frame (reason is free text for messages).
func (c *Checker) Resync(target string, reason string) {
	c.add(target, event{kind: evResync, detail: reason})
}

// Gone marks a target that stopped for good: reliable is not checked for it (the others
// still are, over what it received).
func (c *Checker) Gone(target string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if t := c.targets[target]; t != nil {
		t.gone = true
	}
}

// Targets returns the ids of the targets seen, in order of first appearance.
func (c *Checker) Targets() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.order)
}

// Check evaluates every recorded history against the truth (the records of the topic, for
// example from ReadTopic, read after the run) and returns nil or an *Error listing each
// violation with its guarantee name.
func (c *Checker) Check(truth []Record) error {
	vs := c.Violations(truth)
	if len(vs) == 0 {
		return nil
	}
	return &Error{Violations: vs}
}

// Violations is Check returning the list.
func (c *Checker) Violations(truth []Record) []Violation {
	c.mu.Lock()
	defer c.mu.Unlock()
	tr := newTruth(truth)
	var out []Violation
	for _, id := range c.order {
		t := c.targets[id]
		out = append(out, evaluate(id, t, tr, c.opts)...)
	}
	return out
}
