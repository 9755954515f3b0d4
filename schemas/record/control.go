package record

import (
	"bytes"
	"encoding/json"
	"fmt"
	"time"
)

// Epoch modes carried by EpochBegin.Mode.
const (
	ModeSnapshot  = "snapshot"
	ModeReconcile = "reconcile"
	ModeRewrite   = "rewrite"
)

// Control is the value of a control record: *EpochBegin, *EpochEnd, *Poll or *Position.
type Control interface {
	Kind() Kind
	Marshal() []byte
}

// EpochBegin opens an epoch (key ControlKey(view, KindEpochBegin)).
type EpochBegin struct {
	Epoch      uint64
	Mode       string // ModeSnapshot, ModeReconcile or ModeRewrite
	SourceLSN  string
	SourceTime time.Time
	// Def identifies the view's definition the epoch was read with (DefVersion, then a
	// hash): "" when the writer did not record one (older writers), which a reader must
	// take as unknown, not as equal to anything.
	Def string
}

// EpochEnd closes an epoch. Rows and Hash describe the whole view as of the epoch's
// snapshot; Published and Tombstones count what the epoch itself wrote.
type EpochEnd struct {
	Epoch      uint64
	Rows       int64
	Hash       uint64 // EpochHash.Sum of every live row; 16 hex digits in JSON
	Published  int64
	Tombstones int64
	SourceLSN  string
	Def        string // as EpochBegin.Def
}

// DefVersion prefixes EpochBegin.Def and EpochEnd.Def: the scheme of the hash after it
// ("v1:" and 16 hex digits). A writer that hashes other things, or the same things
// differently, uses another version, so that its definitions never equal an older one's.
const DefVersion = "v1"

// Poll records the progress of an incremental poll.
type Poll struct {
	Watermark  string // key text of the incremental column's highest published value
	SourceLSN  string
	SourceTime time.Time
}

// Position ends a source transaction — the records since the previous position record,
// which a consumer applies together — and carries the stream's source position (key
// PositionKey(); no view).
type Position struct {
	// LSN is the source position: every commit up to it is reflected by the stream up to
	// this record. "" when the stream has no source position (polling).
	LSN string
	// Time is the commit time of the last source transaction up to LSN (or the snapshot
	// time of a poll).
	Time time.Time
	// Stale lists the views whose rows do not follow the position: a view stopped by a bad
	// row keeps its last published rows until the row is corrected.
	Stale []string
	// Behind gives the views that follow the stream at a position of their own, earlier
	// than LSN: a view whose changes are re-read in full, off the stream's path, reflects
	// every commit up to its position (a source position, as LSN) and not yet the later
	// ones of its tables.
	Behind map[string]string
}

type epochBeginJSON struct {
	Epoch      *uint64 `json:"epoch"`
	Mode       string  `json:"mode"`
	SourceLSN  string  `json:"source_lsn"`
	SourceTime string  `json:"source_time"`
	Def        string  `json:"def,omitempty"`
}

type epochEndJSON struct {
	Epoch      *uint64 `json:"epoch"`
	Rows       int64   `json:"rows"`
	Hash       string  `json:"hash"`
	Published  int64   `json:"published"`
	Tombstones int64   `json:"tombstones"`
	SourceLSN  string  `json:"source_lsn"`
	Def        string  `json:"def,omitempty"`
}

type positionJSON struct {
	LSN    string            `json:"lsn,omitempty"`
	Time   string            `json:"time"`
	Stale  []string          `json:"stale,omitempty"`
	Behind map[string]string `json:"behind,omitempty"`
}

type pollJSON struct {
	Watermark  *string `json:"watermark"`
	SourceLSN  string  `json:"source_lsn"`
	SourceTime string  `json:"source_time"`
}

func (*EpochBegin) Kind() Kind { return KindEpochBegin }
func (*EpochEnd) Kind() Kind   { return KindEpochEnd }
func (*Poll) Kind() Kind       { return KindPoll }
func (*Position) Kind() Kind   { return KindPosition }

func mustMarshal(v any) []byte {
	b, err := json.Marshal(v)
	if err != nil { // only plain strings and integers: cannot fail
		panic(err)
	}
	return b
}

func formatOptTime(t time.Time) string {
	if t.IsZero() {
		return ""
	}
	return FormatTime(t)
}

// Marshal returns the JSON value of the record.
func (c *EpochBegin) Marshal() []byte {
	e := c.Epoch
	return mustMarshal(epochBeginJSON{Epoch: &e, Mode: c.Mode, SourceLSN: c.SourceLSN, SourceTime: formatOptTime(c.SourceTime), Def: c.Def})
}

// Marshal returns the JSON value of the record.
func (c *EpochEnd) Marshal() []byte {
	e := c.Epoch
	return mustMarshal(epochEndJSON{Epoch: &e, Rows: c.Rows, Hash: FormatHash(c.Hash), Published: c.Published, Tombstones: c.Tombstones, SourceLSN: c.SourceLSN, Def: c.Def})
}

// Marshal returns the JSON value of the record.
func (c *Poll) Marshal() []byte {
	w := c.Watermark
	return mustMarshal(pollJSON{Watermark: &w, SourceLSN: c.SourceLSN, SourceTime: formatOptTime(c.SourceTime)})
}

// Marshal returns the JSON value of the record.
func (c *Position) Marshal() []byte {
	return mustMarshal(positionJSON{LSN: c.LSN, Time: formatOptTime(c.Time), Stale: c.Stale, Behind: c.Behind})
}

func unmarshal(kind Kind, value []byte, v any) error {
	if len(value) == 0 {
		return fmt.Errorf("%w: empty %s value", ErrBadControl, kind)
	}
	d := json.NewDecoder(bytes.NewReader(value))
	if err := d.Decode(v); err != nil {
		return fmt.Errorf("%w: %s: %v", ErrBadControl, kind, err)
	}
	if d.More() {
		return fmt.Errorf("%w: %s: trailing data", ErrBadControl, kind)
	}
	return nil
}

func parseOptTime(kind Kind, s string) (time.Time, error) {
	if s == "" {
		return time.Time{}, nil
	}
	t, err := ParseTime(s)
	if err != nil {
		return time.Time{}, fmt.Errorf("%w: %s: source_time %q is not RFC 3339", ErrBadControl, kind, s)
	}
	return t, nil
}

// ParseEpochBegin parses an epoch-begin value.
func ParseEpochBegin(value []byte) (*EpochBegin, error) {
	var j epochBeginJSON
	if err := unmarshal(KindEpochBegin, value, &j); err != nil {
		return nil, err
	}
	if j.Epoch == nil {
		return nil, fmt.Errorf("%w: epoch-begin without epoch", ErrBadControl)
	}
	switch j.Mode {
	case ModeSnapshot, ModeReconcile, ModeRewrite:
	default:
		return nil, fmt.Errorf("%w: epoch-begin mode %q", ErrBadControl, j.Mode)
	}
	t, err := parseOptTime(KindEpochBegin, j.SourceTime)
	if err != nil {
		return nil, err
	}
	return &EpochBegin{Epoch: *j.Epoch, Mode: j.Mode, SourceLSN: j.SourceLSN, SourceTime: t, Def: j.Def}, nil
}

// ParseEpochEnd parses an epoch-end value.
func ParseEpochEnd(value []byte) (*EpochEnd, error) {
	var j epochEndJSON
	if err := unmarshal(KindEpochEnd, value, &j); err != nil {
		return nil, err
	}
	if j.Epoch == nil {
		return nil, fmt.Errorf("%w: epoch-end without epoch", ErrBadControl)
	}
	h, err := ParseHash(j.Hash)
	if err != nil {
		return nil, err
	}
	if j.Rows < 0 || j.Published < 0 || j.Tombstones < 0 {
		return nil, fmt.Errorf("%w: epoch-end with a negative count", ErrBadControl)
	}
	return &EpochEnd{Epoch: *j.Epoch, Rows: j.Rows, Hash: h, Published: j.Published, Tombstones: j.Tombstones, SourceLSN: j.SourceLSN, Def: j.Def}, nil
}

// ParsePoll parses a poll value.
func ParsePoll(value []byte) (*Poll, error) {
	var j pollJSON
	if err := unmarshal(KindPoll, value, &j); err != nil {
		return nil, err
	}
	if j.Watermark == nil {
		return nil, fmt.Errorf("%w: poll without watermark", ErrBadControl)
	}
	t, err := parseOptTime(KindPoll, j.SourceTime)
	if err != nil {
		return nil, err
	}
	return &Poll{Watermark: *j.Watermark, SourceLSN: j.SourceLSN, SourceTime: t}, nil
}

// ParsePosition parses a position value.
func ParsePosition(value []byte) (*Position, error) {
	var j positionJSON
	if err := unmarshal(KindPosition, value, &j); err != nil {
		return nil, err
	}
	t, err := parseOptTime(KindPosition, j.Time)
	if err != nil {
		return nil, err
	}
	for _, v := range j.Stale {
		if !ValidViewName(v) {
			return nil, fmt.Errorf("%w: position: stale view %q is not a view name", ErrBadControl, v)
		}
	}
	for v, lsn := range j.Behind {
		if !ValidViewName(v) || lsn == "" {
			return nil, fmt.Errorf("%w: position: behind view %q at %q is not a view name and a position", ErrBadControl, v, lsn)
		}
	}
	return &Position{LSN: j.LSN, Time: t, Stale: j.Stale, Behind: j.Behind}, nil
}

// ParseControl parses the value of a control record of the given kind.
func ParseControl(kind Kind, value []byte) (Control, error) {
	switch kind {
	case KindEpochBegin:
		return ParseEpochBegin(value)
	case KindEpochEnd:
		return ParseEpochEnd(value)
	case KindPoll:
		return ParsePoll(value)
	case KindPosition:
		return ParsePosition(value)
	}
	return nil, fmt.Errorf("%w: %q is not a control kind", ErrBadControl, string(kind))
}
