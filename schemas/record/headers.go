package record

import (
	"fmt"
	"strconv"
	"time"
)

// Header names (schemas/README.md, "Headers"). Every record carries all five.
const (
	HeaderView       = "sc-view"
	HeaderKind       = "sc-kind"
	HeaderEpoch      = "sc-epoch"
	HeaderSourceTime = "sc-source-time"
	HeaderSourceLSN  = "sc-source-lsn"
)

// Header is one record header. It has the layout of sarama.RecordHeader, so the two
// convert with a plain type conversion.
type Header struct {
	Key   []byte
	Value []byte
}

// Meta is what the headers of a record say.
type Meta struct {
	View       string
	Kind       Kind
	Epoch      uint64
	SourceTime time.Time // time of the database snapshot the record was read in
	SourceLSN  string    // pg_current_wal_lsn() text at the start of that snapshot
}

// FormatTime formats t as the headers and control values write times: RFC 3339 in UTC
// with trailing zeros of the fraction trimmed.
func FormatTime(t time.Time) string { return t.UTC().Format(time.RFC3339Nano) }

// ParseTime parses a time written by FormatTime (any RFC 3339 time is accepted).
func ParseTime(s string) (time.Time, error) { return time.Parse(time.RFC3339Nano, s) }

// AppendHeaders appends the five headers of m to dst.
func (m Meta) AppendHeaders(dst []Header) []Header {
	return append(dst,
		Header{Key: []byte(HeaderView), Value: []byte(m.View)},
		Header{Key: []byte(HeaderKind), Value: []byte(m.Kind)},
		Header{Key: []byte(HeaderEpoch), Value: strconv.AppendUint(nil, m.Epoch, 10)},
		Header{Key: []byte(HeaderSourceTime), Value: []byte(FormatTime(m.SourceTime))},
		Header{Key: []byte(HeaderSourceLSN), Value: []byte(m.SourceLSN)},
	)
}

// Headers returns the five headers of m.
func (m Meta) Headers() []Header { return m.AppendHeaders(make([]Header, 0, 5)) }

// MetaBuilder collects headers one by one (see ParseHeaders); it lets adapters that hold
// headers in their own type (e.g. []*sarama.RecordHeader) parse them without copying.
type MetaBuilder struct {
	m    Meta
	seen uint8
}

// Add records one header; headers that are not sc-* headers are ignored.
func (b *MetaBuilder) Add(key, value []byte) error {
	switch string(key) {
	case HeaderView:
		if !ValidViewName(string(value)) {
			return fmt.Errorf("%w: %s=%q is not a valid view name", ErrBadHeader, HeaderView, value)
		}
		b.m.View = string(value)
		b.seen |= 1
	case HeaderKind:
		k := Kind(value)
		if !k.Valid() {
			return fmt.Errorf("%w: %s=%q is not a record kind", ErrBadHeader, HeaderKind, value)
		}
		b.m.Kind = k
		b.seen |= 2
	case HeaderEpoch:
		e, err := strconv.ParseUint(string(value), 10, 64)
		if err != nil {
			return fmt.Errorf("%w: %s=%q is not a decimal epoch", ErrBadHeader, HeaderEpoch, value)
		}
		b.m.Epoch = e
		b.seen |= 4
	case HeaderSourceTime:
		t, err := ParseTime(string(value))
		if err != nil {
			return fmt.Errorf("%w: %s=%q is not an RFC 3339 time", ErrBadHeader, HeaderSourceTime, value)
		}
		b.m.SourceTime = t
		b.seen |= 8
	case HeaderSourceLSN:
		b.m.SourceLSN = string(value)
		b.seen |= 16
	}
	return nil
}

// Meta returns the collected meta; it fails when sc-view, sc-kind or sc-epoch is missing.
// sc-source-time and sc-source-lsn are optional for readers (zero when absent).
func (b *MetaBuilder) Meta() (Meta, error) {
	for i, name := range [...]string{HeaderView, HeaderKind, HeaderEpoch} {
		if b.seen&(1<<i) == 0 {
			return Meta{}, fmt.Errorf("%w: missing %s", ErrBadHeader, name)
		}
	}
	return b.m, nil
}

// ParseHeaders reads the Meta of a record from its headers.
func ParseHeaders(headers []Header) (Meta, error) {
	var b MetaBuilder
	for _, h := range headers {
		if err := b.Add(h.Key, h.Value); err != nil {
			return Meta{}, err
		}
	}
	return b.Meta()
}
