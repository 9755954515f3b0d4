package record

import "fmt"

// Kind is the value of the sc-kind header.
type Kind string

// The record kinds.
const (
	KindRow        Kind = "row"
	KindEpochBegin Kind = "epoch-begin"
	KindEpochEnd   Kind = "epoch-end"
	KindPoll       Kind = "poll"
	// KindPosition is the stream-level record that ends a source transaction (every
	// record since the previous position record) and carries the source position.
	KindPosition Kind = "position"
)

// Valid reports whether k is one of the five kinds.
func (k Kind) Valid() bool {
	switch k {
	case KindRow, KindEpochBegin, KindEpochEnd, KindPoll, KindPosition:
		return true
	}
	return false
}

// IsControl reports whether records of kind k are control records.
func (k Kind) IsControl() bool {
	return k == KindEpochBegin || k == KindEpochEnd || k == KindPoll || k == KindPosition
}

// IsStream reports whether records of kind k belong to the stream rather than to a view
// (they carry no sc-view header and go to every subscriber).
func (k Kind) IsStream() bool { return k == KindPosition }

func (k Kind) controlSuffix() string {
	switch k {
	case KindEpochBegin:
		return "begin"
	case KindEpochEnd:
		return "end"
	case KindPoll:
		return "poll"
	case KindPosition:
		return "position"
	}
	panic(fmt.Sprintf("record: %q is not a control kind", string(k)))
}
