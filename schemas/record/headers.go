package record

import (
	"fmt"
	"strconv"
	"time"
)

// Header names (schemas/README.md, "Headers").
const (
	HeaderView       = "sc-view" // every record but stream-level ones (KindPosition)
	HeaderKind       = "sc-kind"
	HeaderEpoch      = "sc-epoch"
	HeaderSourceTime = "sc-source-time"
	HeaderSourceLSN  = "sc-source-lsn" // when the stream has a source position (WAL capture)
	HeaderTxn        = "sc-txn"        // "1" on every record of a source transaction
)

// Header is one record header. It has the layout of sarama.RecordHeader, so the two
// convert with a plain type conversion.
type Header struct {
	Key   []byte
	Value []byte
}

// Meta is what the headers of a record say.
type Meta struct {
	View       string // "" for stream-level kinds (KindPosition)
	Kind       Kind
	Epoch      uint64
	SourceTime time.Time // commit (WAL capture) or snapshot (polling) time the record comes from
	// SourceLSN is the source position of the record's source transaction (WAL capture:
	// PostgreSQL's text form of an LSN, "16/B374D848"); "" when the stream has none.
	SourceLSN string
	// Txn: the record belongs to a source transaction that ends at the next position
	// record; a consumer applies them together.
	Txn bool
}

// FormatTime formats t as the headers and control values write times: RFC 3339 in UTC
// with trailing zeros of the fraction trimmed.
func FormatTime(t time.Time) string { return t.UTC().Format(time.RFC3339Nano) }

// ParseTime parses a time written by FormatTime (any RFC 3339 time is accepted).
func ParseTime(s string) (time.Time, error) { return time.Parse(time.RFC3339Nano, s) }

// AppendHeaders appends the headers of m to dst: sc-view (unless the kind is
// stream-level), sc-kind, sc-epoch, sc-source-time, sc-source-lsn (when set) and sc-txn
// (when set).
func (m Meta) AppendHeaders(dst []Header) []Header {
	if !m.Kind.IsStream() {
		dst = append(dst, Header{Key: []byte(HeaderView), Value: []byte(m.View)})
	}
	dst = append(dst,
		Header{Key: []byte(HeaderKind), Value: []byte(m.Kind)},
		Header{Key: []byte(HeaderEpoch), Value: strconv.AppendUint(nil, m.Epoch, 10)},
		Header{Key: []byte(HeaderSourceTime), Value: []byte(FormatTime(m.SourceTime))},
	)
	if m.SourceLSN != "" {
		dst = append(dst, Header{Key: []byte(HeaderSourceLSN), Value: []byte(m.SourceLSN)})
	}
	if m.Txn {
		dst = append(dst, Header{Key: []byte(HeaderTxn), Value: []byte("1")})
	}
	return dst
}

// Headers returns the headers of m.
func (m Meta) Headers() []Header { return m.AppendHeaders(make([]Header, 0, 6)) }

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
	case HeaderTxn:
		if string(value) != "1" {
			return fmt.Errorf("%w: %s=%q is not 1", ErrBadHeader, HeaderTxn, value)
		}
		b.m.Txn = true
	}
	return nil
}

// Meta returns the collected meta; it fails when sc-kind or sc-epoch is missing, or
// sc-view for a record that belongs to a view. sc-source-time, sc-source-lsn and sc-txn
// are optional (zero when absent).
func (b *MetaBuilder) Meta() (Meta, error) {
	for i, name := range [...]string{HeaderView, HeaderKind, HeaderEpoch} {
		if b.seen&(1<<i) == 0 && !(i == 0 && b.m.Kind.IsStream()) {
			return Meta{}, fmt.Errorf("%w: missing %s", ErrBadHeader, name)
		}
	}
	if b.m.Kind.IsStream() && b.m.View != "" {
		return Meta{}, fmt.Errorf("%w: a %s record has %s=%q", ErrBadHeader, b.m.Kind, HeaderView, b.m.View)
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
