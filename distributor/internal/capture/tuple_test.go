package capture

import (
	"bytes"
	"fmt"
	"strings"
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

// inStream gives a row change message as it is sent inside a stream: its
// (sub)transaction's xid after the message type.
func inStream(data []byte, xid uint32) []byte {
	return append([]byte{data[0], byte(xid >> 24), byte(xid >> 16), byte(xid >> 8), byte(xid)}, data[1:]...)
}

// render gives a message's row change as text, with its xid, to compare two decoders.
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
	case *pglogrepl.InsertMessageV2:
		return fmt.Sprintf("I %d %d %s", m.Xid, m.RelationID, tuple(m.Tuple))
	case *pglogrepl.UpdateMessageV2:
		return fmt.Sprintf("U %d %d %c %s %s", m.Xid, m.RelationID, m.OldTupleType, tuple(m.OldTuple), tuple(m.NewTuple))
	case *pglogrepl.DeleteMessageV2:
		return fmt.Sprintf("D %d %d %c %s", m.Xid, m.RelationID, m.OldTupleType, tuple(m.OldTuple))
	}
	return fmt.Sprintf("%T", m)
}

// TestParseMessageAliases: a row change's values alias the message (no copy), and parse
// as pglogrepl parses them, outside a stream and inside one (where the xid comes first);
// a message that ends early is an error.
func TestParseMessageAliases(t *testing.T) {
	n := []byte{'N'}
	for _, stream := range []bool{false, true} {
		for _, data := range [][]byte{
			msgBytes('I', 7, n, tupleBytes("b\x00\x00\x00\x01", "n", "tbig value")),
			msgBytes('U', 7, []byte{'K'}, tupleBytes("b\x01"), n, tupleBytes("b\x02", "u")),
			msgBytes('U', 7, []byte{'O'}, tupleBytes("b\x01", "tx"), n, tupleBytes("b\x02", "ty")),
			msgBytes('U', 7, n, tupleBytes("b\x02")),
			msgBytes('D', 7, []byte{'K'}, tupleBytes("b\x01")),
		} {
			if stream {
				data = inStream(data, 0x01020304)
			}
			got, err := parseMessage(data, stream)
			if err != nil {
				t.Fatalf("%q: %v", data, err)
			}
			want, err := pglogrepl.ParseV2(data, stream)
			if err != nil {
				t.Fatal(err)
			}
			if render(got) != render(want) {
				t.Errorf("parsed %s, pglogrepl %s", render(got), render(want))
			}
			if stream && !strings.HasPrefix(render(got)[2:], "16909060 7 ") {
				t.Errorf("in a stream: %s, want xid 16909060 and relation 7", render(got))
			}
			if data[0] == 'I' {
				v := got.(*pglogrepl.InsertMessageV2).Tuple.Columns[2].Data
				data[len(data)-1] = '!'
				if !bytes.HasSuffix(v, []byte("!")) {
					t.Error("the value is a copy")
				}
			}
		}
	}
	full := msgBytes('I', 7, n, tupleBytes("b\x00\x00\x00\x01", "tvalue"))
	for _, stream := range []bool{false, true} {
		data := full
		if stream {
			data = inStream(full, 9)
		}
		for i := 1; i < len(data); i++ {
			if m, err := parseMessage(data[:i], stream); err == nil {
				t.Errorf("stream %v, %d of %d bytes: %s, want an error", stream, i, len(data), render(m))
			}
		}
	}
	// Outside a stream the xid's bytes are read as the relation, the relation's first byte
	// as the tuple type: refused.
	if m, err := parseMessage(inStream(full, 9), false); err == nil {
		t.Errorf("a streamed insert read outside a stream as %s", render(m))
	}
	if _, err := parseMessage(nil, false); err == nil {
		t.Error("an empty message parsed")
	}
}

// TestParseStreamMessages: the stream's own messages are pglogrepl's V2 messages, a short
// one an error.
func TestParseStreamMessages(t *testing.T) {
	u32 := func(v uint32) []byte { return []byte{byte(v >> 24), byte(v >> 16), byte(v >> 8), byte(v)} }
	u64 := func(v uint64) []byte { return append(u32(uint32(v>>32)), u32(uint32(v))...) }
	start, err := parseMessage(append(append([]byte{'S'}, u32(41)...), 1), false)
	if m, ok := start.(*pglogrepl.StreamStartMessageV2); err != nil || !ok || m.Xid != 41 || m.FirstSegment != 1 {
		t.Errorf("stream start: %#v, %v", start, err)
	}
	if stop, err := parseMessage([]byte{'E'}, true); err != nil {
		t.Errorf("stream stop: %v", err)
	} else if _, ok := stop.(*pglogrepl.StreamStopMessageV2); !ok {
		t.Errorf("stream stop: %T", stop)
	}
	commit := append(append(append(append(append([]byte{'c'}, u32(41)...), 0), u64(0x100)...), u64(0x180)...), u64(5)...)
	if msg, err := parseMessage(commit, false); err != nil {
		t.Errorf("stream commit: %v", err)
	} else if m, ok := msg.(*pglogrepl.StreamCommitMessageV2); !ok || m.Xid != 41 || m.CommitLSN != 0x100 || m.TransactionEndLSN != 0x180 {
		t.Errorf("stream commit: %#v", msg)
	}
	abort := append(append([]byte{'A'}, u32(41)...), u32(42)...)
	if msg, err := parseMessage(abort, false); err != nil {
		t.Errorf("stream abort: %v", err)
	} else if m, ok := msg.(*pglogrepl.StreamAbortMessageV2); !ok || m.Xid != 41 || m.SubXid != 42 {
		t.Errorf("stream abort: %#v", msg)
	}
	truncate := append(append(append([]byte{'T'}, u32(41)...), u32(2)...), 0)
	truncate = append(append(truncate, u32(7)...), u32(8)...)
	if msg, err := parseMessage(truncate, true); err != nil {
		t.Errorf("truncate in a stream: %v", err)
	} else if m, ok := msg.(*pglogrepl.TruncateMessageV2); !ok || m.Xid != 41 || len(m.RelationIDs) != 2 || m.RelationIDs[1] != 8 {
		t.Errorf("truncate in a stream: %#v", msg)
	}
	huge := append(append(append([]byte{'T'}, u32(41)...), u32(1<<30)...), 0, 0, 0, 0, 7)
	for _, short := range [][]byte{commit[:20], abort[:6], {'S', 0, 0}, truncate[:len(truncate)-1], huge} {
		if m, err := parseMessage(short, true); err == nil {
			t.Errorf("%q: %#v, want an error", short, m)
		}
	}
}

// FuzzParseMessage: parseMessage never panics (pglogrepl's panics on the other messages
// are errors), and a row change it parses, inside a stream or not, is what pglogrepl's
// ParseV2 parses from the same bytes, but for an insert of a tuple of no column (a table
// may have none), which pglogrepl refuses as too short. (Where it refuses, pglogrepl is not
// asked: it allocates a column's declared length before it finds that the message ends
// first, up to 4 GiB.)
func FuzzParseMessage(f *testing.F) {
	n := []byte{'N'}
	f.Add(msgBytes('I', 7, n, tupleBytes("b\x00\x00\x00\x01", "n", "tvalue")), false)
	f.Add(msgBytes('U', 7, []byte{'O'}, tupleBytes("b\x01", "u"), n, tupleBytes("b\x02", "ty")), false)
	f.Add(msgBytes('D', 7, []byte{'K'}, tupleBytes("b\x01")), false)
	f.Add(inStream(msgBytes('I', 7, n, tupleBytes("b\x00\x00\x00\x01", "n", "tvalue")), 12), true)
	f.Add(inStream(msgBytes('U', 7, []byte{'K'}, tupleBytes("b\x01"), n, tupleBytes("b\x02", "ty")), 12), true)
	f.Add(inStream(msgBytes('D', 7, []byte{'O'}, tupleBytes("b\x01", "n")), 12), true)
	f.Add([]byte{'B'}, false)
	f.Add([]byte{'S', 0, 0, 0, 1, 1}, false)
	f.Add([]byte{'T', 0, 0, 0, 1, 0, 0, 0, 1, 0, 0, 0, 0, 7}, true)
	f.Fuzz(func(t *testing.T, data []byte, stream bool) {
		got, err := parseMessage(data, stream)
		if err != nil || data[0] != 'I' && data[0] != 'U' && data[0] != 'D' {
			return // refused, or pglogrepl's own
		}
		want, werr := pglogrepl.ParseV2(data, stream)
		xid := 0
		if stream {
			xid = 4
		}
		if werr != nil && data[0] == 'I' && len(data) == 8+xid {
			return // pglogrepl wants 8 bytes after the type (and xid), a tuple of no column has 7
		}
		if werr != nil {
			t.Fatalf("%q: parsed %s, pglogrepl: %v", data, render(got), werr)
		}
		if render(got) != render(want) {
			t.Fatalf("%q: parsed %s, pglogrepl %s", data, render(got), render(want))
		}
	})
}
