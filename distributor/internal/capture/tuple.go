package capture

import (
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/jackc/pglogrepl"
)

// parseMessage parses a pgoutput message (protocol version 1, what Run asks for) as
// pglogrepl.Parse does, except for the row changes (insert, update, delete), whose column
// values alias data instead of being copied: pglogrepl copies every value of every
// column, so a change of a 300 MiB value held the message's buffer and a copy of it at
// once, while the receiver keeps nothing of it but the captured columns' values (copied
// into an Identity before the next message is read, the only point at which data is
// reused). The row changes are bounds-checked: a message that ends early is an error, not
// a panic. The messages parsed here carry no message type (Type() is 0): the receiver
// goes by their Go type.
//
// The other messages are pglogrepl's to parse, which indexes past the end of a short one
// (a truncate's relation list, say) and panics: that panic is an error here, so that a
// malformed message stops the stream instead of the process.
func parseMessage(data []byte) (msg pglogrepl.Message, err error) {
	if len(data) == 0 {
		return nil, errors.New("empty pgoutput message")
	}
	switch data[0] {
	case 'I', 'U', 'D':
	default:
		defer func() {
			if p := recover(); p != nil {
				msg, err = nil, fmt.Errorf("malformed pgoutput message %q of %d bytes: %v", data[0], len(data), p)
			}
		}()
		return pglogrepl.Parse(data)
	}
	p := tupleParser{b: data[1:]}
	rel := p.uint32()
	kind := p.byte()
	switch data[0] {
	case 'I':
		if kind != 'N' {
			return nil, fmt.Errorf("insert message: tuple type %q, want 'N'", kind)
		}
		msg = &pglogrepl.InsertMessage{RelationID: rel, Tuple: p.tuple()}
	case 'U':
		m := &pglogrepl.UpdateMessage{RelationID: rel}
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
		msg = &pglogrepl.DeleteMessage{RelationID: rel, OldTupleType: kind, OldTuple: p.tuple()}
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
