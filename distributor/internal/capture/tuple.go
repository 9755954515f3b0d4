package capture

import (
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/jackc/pglogrepl"
)

// parseMessage parses a pgoutput message of protocol version 2 (what Run asks for) as
// pglogrepl.ParseV2 does, except for the row changes (insert, update, delete), whose
// column values alias data instead of being copied: pglogrepl copies every value of every
// column, so a change of a 300 MiB value held the message's buffer and a copy of it at
// once, while the receiver keeps nothing of it but the captured columns' values (copied
// into an Identity before the next message is read, the only point at which data is
// reused). inStream is true between a stream start and its stop, where a row change
// carries its (sub)transaction's xid after the message type. The row changes are
// bounds-checked: a message that ends early is an error, not a panic. The messages parsed
// here carry no message type (Type() is 0): the receiver goes by their Go type.
//
// The other messages (stream start, stop, commit and abort among them) are pglogrepl's to
// parse, which indexes past the end of a short one (a truncate's relation list, say) and
// panics (a truncate's stated relation count is checked first): that panic is an error here, so that a malformed message stops the stream
// instead of the process.
func parseMessage(data []byte, inStream bool) (msg pglogrepl.Message, err error) {
	if len(data) == 0 {
		return nil, errors.New("empty pgoutput message")
	}
	switch data[0] {
	case 'I', 'U', 'D':
	case 'T':
		// pglogrepl allocates the relation list by the count the message states: a count
		// past what the message holds is refused before (up to 16 GiB).
		off := 1
		if inStream {
			off += 4
		}
		if len(data) >= off+5 {
			if n := binary.BigEndian.Uint32(data[off:]); int64(n)*4 > int64(len(data)-off-5) {
				return nil, fmt.Errorf("truncate message of %d bytes names %d relations", len(data), n)
			}
		}
		fallthrough
	default:
		defer func() {
			if p := recover(); p != nil {
				msg, err = nil, fmt.Errorf("malformed pgoutput message %q of %d bytes: %v", data[0], len(data), p)
			}
		}()
		return pglogrepl.ParseV2(data, inStream)
	}
	p := tupleParser{b: data[1:]}
	var xid pglogrepl.InStreamMessageV2WithXid
	if inStream {
		xid.Xid = p.uint32()
	}
	rel := p.uint32()
	kind := p.byte()
	switch data[0] {
	case 'I':
		if kind != 'N' {
			return nil, fmt.Errorf("insert message: tuple type %q, want 'N'", kind)
		}
		msg = &pglogrepl.InsertMessageV2{InsertMessage: pglogrepl.InsertMessage{RelationID: rel, Tuple: p.tuple()}, InStreamMessageV2WithXid: xid}
	case 'U':
		m := &pglogrepl.UpdateMessageV2{UpdateMessage: pglogrepl.UpdateMessage{RelationID: rel}, InStreamMessageV2WithXid: xid}
		if kind == 'K' || kind == 'O' {
			m.OldTupleType, m.OldTuple = kind, p.tuple()
			kind = p.byte()
		}
		if kind != 'N' {
			return nil, fmt.Errorf("update message: tuple type %q, want 'N' (after an optional 'K' or 'O')", kind)
		}
		m.NewTuple = p.tuple()
		msg = m
	case 'D':
		if kind != 'K' && kind != 'O' {
			return nil, fmt.Errorf("delete message: tuple type %q, want 'K' or 'O'", kind)
		}
		msg = &pglogrepl.DeleteMessageV2{DeleteMessage: pglogrepl.DeleteMessage{RelationID: rel, OldTupleType: kind, OldTuple: p.tuple()}, InStreamMessageV2WithXid: xid}
	}
	if p.short {
		return nil, fmt.Errorf("pgoutput message %q of %d bytes ends early", data[0], len(data))
	}
	return msg, nil
}

// tupleParser reads a message's fields; past its end it reads zeros and sets short.
type tupleParser struct {
	b     []byte
	short bool
}

func (p *tupleParser) take(n int) []byte {
	if n < 0 || n > len(p.b) {
		p.short, p.b = true, nil
		return nil
	}
	out := p.b[:n:n]
	p.b = p.b[n:]
	return out
}

func (p *tupleParser) byte() byte {
	if b := p.take(1); b != nil {
		return b[0]
	}
	return 0
}

func (p *tupleParser) uint32() uint32 {
	if b := p.take(4); b != nil {
		return binary.BigEndian.Uint32(b)
	}
	return 0
}

// tuple reads a TupleData: Int16 columns, each a Byte1 kind ('n' null, 'u' unchanged
// toasted value, 't' text, 'b' binary), the last two followed by Int32 length and bytes.
func (p *tupleParser) tuple() *pglogrepl.TupleData {
	b := p.take(2)
	if b == nil {
		return nil
	}
	n := binary.BigEndian.Uint16(b)
	t := &pglogrepl.TupleData{ColumnNum: n, Columns: make([]*pglogrepl.TupleDataColumn, 0, min(int(n), len(p.b)))}
	for range n {
		c := &pglogrepl.TupleDataColumn{DataType: p.byte()}
		switch c.DataType {
		case pglogrepl.TupleDataTypeText, pglogrepl.TupleDataTypeBinary:
			c.Length = p.uint32()
			c.Data = p.take(int(c.Length))
		}
		if p.short {
			return nil
		}
		t.Columns = append(t.Columns, c)
	}
	return t
}
