package bench

import (
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"strings"
	"testing"
	"testing/iotest"
	"time"
)

// pgoutput messages built by hand, protocol version 1.
type pgmsg struct{ b []byte }

func msg(t byte) *pgmsg                { return &pgmsg{b: []byte{t}} }
func (m *pgmsg) u8(v byte) *pgmsg      { m.b = append(m.b, v); return m }
func (m *pgmsg) u16(v uint16) *pgmsg   { m.b = binary.BigEndian.AppendUint16(m.b, v); return m }
func (m *pgmsg) u32(v uint32) *pgmsg   { m.b = binary.BigEndian.AppendUint32(m.b, v); return m }
func (m *pgmsg) u64(v uint64) *pgmsg   { m.b = binary.BigEndian.AppendUint64(m.b, v); return m }
func (m *pgmsg) str(s string) *pgmsg   { m.b = append(append(m.b, s...), 0); return m }
func (m *pgmsg) bytes(v []byte) *pgmsg { m.b = append(m.b, v...); return m }
func (m *pgmsg) tuple(cols ...[]byte) *pgmsg { // nil: NULL
	m.u16(uint16(len(cols)))
	for _, c := range cols {
		if c == nil {
			m.u8('n')
			continue
		}
		m.u8('b').u32(uint32(len(c))).bytes(c)
	}
	return m
}

func begin(xid uint32) []byte { return msg('B').u64(0x100).u64(0).u32(xid).b }
func commit(lsn uint64) []byte {
	return msg('C').u8(0).u64(lsn).u64(lsn + 8).u64(0).b
}
func relation(oid uint32, cols ...string) []byte {
	m := msg('R').u32(oid).str("public").str("t").u8('d').u16(uint16(len(cols)))
	for i, c := range cols {
		flags := byte(0)
		if i == 0 {
			flags = 1 // part of the key
		}
		m.u8(flags).str(c).u32(20).u32(0xFFFFFFFF)
	}
	return m.b
}
func be64(v uint64) []byte { return binary.BigEndian.AppendUint64(nil, v) }

// sampleOutput is pg_recvlogical's output of two transactions: an insert whose text holds
// newlines, then an update with its old key, a delete, a truncate, a type, an origin and
// a logical message.
func sampleOutput() (out []byte, msgs [][]byte) {
	msgs = [][]byte{
		begin(700),
		relation(16384, "id", "note", "n"),
		msg('I').u32(16384).u8('N').tuple(be64(1), []byte("line one\nline two\n"), nil).b,
		commit(0x1000),
		begin(701),
		msg('O').u64(0x900).str("origin\n").b,
		msg('Y').u32(99).str("public").str("mood").b,
		msg('U').u32(16384).u8('K').tuple(be64(1), nil, nil).u8('N').tuple(be64(2), []byte("\n"), []byte{0, 0, 0, 7}).b,
		msg('D').u32(16384).u8('K').tuple(be64(2), nil, nil).b,
		msg('T').u32(2).u8(0).u32(16384).u32(16390).b,
		msg('M').u8(1).u64(0x1100).str("prefix").u32(3).bytes([]byte("a\nb")).b,
		commit(0x2000),
	}
	for _, m := range msgs {
		out = append(append(out, m...), '\n')
	}
	return out, msgs
}

// TestMessageReader splits the output into the messages it was made of, whole or read one
// byte at a time (messages then arrive in pieces).
func TestMessageReader(t *testing.T) {
	out, want := sampleOutput()
	for name, r := range map[string]io.Reader{"whole": bytes.NewReader(out), "byte by byte": iotest.OneByteReader(bytes.NewReader(out))} {
		mr := newMessageReader(r)
		for i, w := range want {
			got, err := mr.next()
			if err != nil {
				t.Fatalf("%s: message %d (%c): %v", name, i, w[0], err)
			}
			if !bytes.Equal(got, w) {
				t.Fatalf("%s: message %d = %q, want %q", name, i, got, w)
			}
		}
		if _, err := mr.next(); err != io.EOF {
			t.Fatalf("%s: after the last message: %v, want EOF", name, err)
		}
	}
}

// TestMessageReaderErrors: output that is not pgoutput messages each followed by a newline
// is an error, never a wrong split.
func TestMessageReaderErrors(t *testing.T) {
	for name, tc := range map[string]struct {
		out  []byte
		want string
	}{
		"no newline":     {append(begin(1), 'x'), "not followed by a newline"},
		"unknown type":   {[]byte("Z123\n"), "unknown pgoutput message type"},
		"cut in a tuple": {msg('I').u32(1).u8('N').u16(1).u8('b').u32(10).bytes([]byte("abc")).b, io.ErrUnexpectedEOF.Error()},
		"bad column":     {append(msg('I').u32(1).u8('N').u16(1).u8('x').b, '\n'), "invalid tuple column kind"},
	} {
		_, err := newMessageReader(bytes.NewReader(tc.out)).next()
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want an error with %q", name, err, tc.want)
		}
	}
}

// TestParseOutput records the transactions of the output: xid, rows, commit LSN and, with
// KeepChanges, each change's columns.
func TestParseOutput(t *testing.T) {
	out, _ := sampleOutput()
	r := &RecvLogical{cfg: RecvLogicalConfig{KeepChanges: true}, txns: map[uint32]*LogicalTxn{}, changed: make(chan struct{})}
	before := time.Now()
	if err := r.parse(newMessageReader(bytes.NewReader(out))); err != io.EOF {
		t.Fatalf("parse: %v, want EOF at the end", err)
	}
	if r.Rows() != 3 {
		t.Errorf("%d rows, want 3", r.Rows())
	}
	t1, ok := r.Txn(700)
	if !ok || t1.Rows != 1 || t1.CommitLSN != 0x1000 || t1.Received.Before(before) || len(t1.Changes) != 1 {
		t.Fatalf("transaction 700: %+v, %v", t1, ok)
	}
	c := t1.Changes[0]
	if c.Op != OpInsert || c.Table != "public.t" || strings.Join(c.Columns, ",") != "id,note,n" ||
		!bytes.Equal(c.Values[0], be64(1)) || string(c.Values[1]) != "line one\nline two\n" || c.Values[2] != nil {
		t.Errorf("insert: %+v", c)
	}
	t2, ok := r.Txn(701)
	if !ok || t2.Rows != 2 || len(t2.Changes) != 2 {
		t.Fatalf("transaction 701: %+v, %v", t2, ok)
	}
	if u := t2.Changes[0]; u.Op != OpUpdate || !bytes.Equal(u.Values[0], be64(2)) || !bytes.Equal(u.Values[2], []byte{0, 0, 0, 7}) {
		t.Errorf("update: %+v", u)
	}
	if d := t2.Changes[1]; d.Op != OpDelete || !bytes.Equal(d.Values[0], be64(2)) || d.Values[1] != nil {
		t.Errorf("delete: %+v", d)
	}
	// A change outside a transaction is an error.
	r = &RecvLogical{txns: map[uint32]*LogicalTxn{}, changed: make(chan struct{})}
	bad := append(msg('D').u32(16384).u8('K').tuple(be64(2)).b, '\n')
	if err := r.parse(newMessageReader(bytes.NewReader(bad))); err == nil || errors.Is(err, io.EOF) {
		t.Errorf("a delete without begin: %v", err)
	}
}

// FuzzPgoutputLen: any input gives a length within it or an error, never a panic.
func FuzzPgoutputLen(f *testing.F) {
	_, msgs := sampleOutput()
	for _, m := range msgs {
		f.Add(m)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		n, err := pgoutputLen(b)
		if err == nil && (n < 1 || n > len(b)) {
			t.Fatalf("length %d of a %d-byte input", n, len(b))
		}
	})
}
