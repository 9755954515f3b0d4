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
)

// Valid reports whether k is one of the four kinds.
func (k Kind) Valid() bool {
	switch k {
	case KindRow, KindEpochBegin, KindEpochEnd, KindPoll:
		return true
	}
	return false
}

// IsControl reports whether records of kind k are control records.
func (k Kind) IsControl() bool { return k == KindEpochBegin || k == KindEpochEnd || k == KindPoll }

func (k Kind) controlSuffix() string {
	switch k {
	case KindEpochBegin:
		return "begin"
	case KindEpochEnd:
		return "end"
	case KindPoll:
		return "poll"
	}
	panic(fmt.Sprintf("record: %q is not a control kind", string(k)))
}
