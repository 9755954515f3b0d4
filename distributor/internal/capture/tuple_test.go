package capture

import (
	"bytes"
	"fmt"
	"testing"

	"github.com/jackc/pglogrepl"
)

// tupleBytes encodes a TupleData: each column "n", "u", or "b"/"t" followed by its value.
func tupleBytes(cols ...string) []byte {
	b := []byte{0, byte(len(cols))}
	for _, c := range cols {
		b = append(b, c[0])
		if c[0] == 'b' || c[0] == 't' {
			v := c[1:]
			b = append(b, byte(len(v)>>24), byte(len(v)>>16), byte(len(v)>>8), byte(len(v)))
			b = append(b, v...)
		}
	}
	return b
}

func msgBytes(typ byte, rel uint32, parts ...[]byte) []byte {
	b := []byte{typ, byte(rel >> 24), byte(rel >> 16), byte(rel >> 8), byte(rel)}
	for _, p := range parts {
		b = append(b, p...)
	}
	return b
}

// render gives a message's row change as text, to compare two decoders.
func render(m pglogrepl.Message) string {
	tuple := func(t *pglogrepl.TupleData) string {
		if t == nil {
			return "-"
		}
		s := fmt.Sprintf("%d[", t.ColumnNum)
		for _, c := range t.Columns {
			s += fmt.Sprintf("%c:%d:%q ", c.DataType, c.Length, c.Data)
		}
		return s + "]"
	}
	switch m := m.(type) {
	case *pglogrepl.InsertMessage:
		return fmt.Sprintf("I %d %s", m.RelationID, tuple(m.Tuple))
	case *pglogrepl.UpdateMessage:
		return fmt.Sprintf("U %d %c %s %s", m.RelationID, m.OldTupleType, tuple(m.OldTuple), tuple(m.NewTuple))
	case *pglogrepl.DeleteMessage:
		return fmt.Sprintf("D %d %c %s", m.RelationID, m.OldTupleType, tuple(m.OldTuple))
	}
	return fmt.Sprintf("%T", m)
}

// TestParseMessageAliases: a row change's values alias the message (no copy), and parse
// as pglogrepl parses them; a message that ends early is an error.
func TestParseMessageAliases(t *testing.T) {
	n := []byte{'N'}
	for _, data := range [][]byte{
		msgBytes('I', 7, n, tupleBytes("b\x00\x00\x00\x01", "n", "tbig value")),
		msgBytes('U', 7, []byte{'K'}, tupleBytes("b\x01"), n, tupleBytes("b\x02", "u")),
		msgBytes('U', 7, []byte{'O'}, tupleBytes("b\x01", "tx"), n, tupleBytes("b\x02", "ty")),
		msgBytes('U', 7, n, tupleBytes("b\x02")),
		msgBytes('D', 7, []byte{'K'}, tupleBytes("b\x01")),
	} {
		got, err := parseMessage(data)
		if err != nil {
			t.Fatalf("%q: %v", data, err)
		}
		want, err := pglogrepl.Parse(data)
		if err != nil {
			t.Fatal(err)
		}
		if render(got) != render(want) {
			t.Errorf("parsed %s, pglogrepl %s", render(got), render(want))
		}
		if data[0] == 'I' {
			v := got.(*pglogrepl.InsertMessage).Tuple.Columns[2].Data
			data[len(data)-1] = '!'
			if !bytes.HasSuffix(v, []byte("!")) {
				t.Error("the value is a copy")
			}
		}
	}
	full := msgBytes('I', 7, n, tupleBytes("b\x00\x00\x00\x01", "tvalue"))
	for i := 1; i < len(full); i++ {
		if m, err := parseMessage(full[:i]); err == nil {
			t.Errorf("%d of %d bytes: %s, want an error", i, len(full), render(m))
		}
	}
	if _, err := parseMessage(nil); err == nil {
		t.Error("an empty message parsed")
	}
}

// FuzzParseMessage: parseMessage never panics (pglogrepl's panics on the other messages
// are errors), and a row change it parses is what
// pglogrepl parses from the same bytes, but for an insert of a tuple of no column (a table
// may have none), which pglogrepl refuses as too short. (Where it refuses, pglogrepl is not asked: it
// allocates a column's declared length before it finds that the message ends first, up
// to 4 GiB.)
func FuzzParseMessage(f *testing.F) {
	n := []byte{'N'}
	f.Add(msgBytes('I', 7, n, tupleBytes("b\x00\x00\x00\x01", "n", "tvalue")))
	f.Add(msgBytes('U', 7, []byte{'O'}, tupleBytes("b\x01", "u"), n, tupleBytes("b\x02", "ty")))
	f.Add(msgBytes('D', 7, []byte{'K'}, tupleBytes("b\x01")))
	f.Add([]byte{'B'})
	f.Fuzz(func(t *testing.T, data []byte) {
		got, err := parseMessage(data)
		if err != nil || data[0] != 'I' && data[0] != 'U' && data[0] != 'D' {
			return // refused, or pglogrepl's own
		}
		want, werr := pglogrepl.Parse(data)
		if werr != nil && data[0] == 'I' && len(data) == 8 {
			return // pglogrepl wants 8 bytes after the type, a tuple of no column has 7
		}
		if werr != nil {
			t.Fatalf("%q: parsed %s, pglogrepl: %v", data, render(got), werr)
		}
		if render(got) != render(want) {
			t.Fatalf("%q: parsed %s, pglogrepl %s", data, render(got), render(want))
		}
	})
}
