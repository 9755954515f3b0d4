package bench

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
)

// pg_recvlogical writes each message of the output plugin followed by a newline. pgoutput's
// messages are binary and may hold newlines themselves, so its output is split by the
// messages' own lengths: each message type (protocol version 1, without streaming) has a
// layout from which its length follows. The messages themselves are then parsed by
// pglogrepl, the library the distributor reads them with.

// errShort: the buffer ends inside the message.
var errShort = errors.New("short message")

// pgoutputLen returns the length of the pgoutput message at the start of b, errShort when
// b ends before it does.
func pgoutputLen(b []byte) (int, error) {
	c := cursor{b: b}
	switch t := c.byte(); t {
	case 'B': // final LSN, commit time, xid
		c.skip(8 + 8 + 4)
	case 'C': // flags, commit LSN, end LSN, commit time
		c.skip(1 + 8 + 8 + 8)
	case 'O': // origin LSN, name
		c.skip(8)
		c.cstring()
	case 'R': // oid, namespace, name, replica identity, columns
		c.skip(4)
		c.cstring()
		c.cstring()
		c.skip(1)
		for n := c.uint16(); n > 0 && c.err == nil; n-- {
			c.skip(1) // flags
			c.cstring()
			c.skip(4 + 4) // type oid, modifier
		}
	case 'Y': // type oid, namespace, name
		c.skip(4)
		c.cstring()
		c.cstring()
	case 'I': // relation, 'N', new tuple
		c.skip(4 + 1)
		c.tuple()
	case 'U': // relation, optionally 'K' or 'O' and the old tuple, 'N', new tuple
		c.skip(4)
		if k := c.peek(); k == 'K' || k == 'O' {
			c.skip(1)
			c.tuple()
		}
		c.skip(1)
		c.tuple()
	case 'D': // relation, 'K' or 'O', old tuple
		c.skip(4 + 1)
		c.tuple()
	case 'T': // relation count, options, relations
		n := c.uint32()
		c.skip(1)
		c.skip(4 * int(n))
	case 'M': // flags, LSN, prefix, content
		c.skip(1 + 8)
		c.cstring()
		c.skip(int(c.uint32()))
	default:
		if c.err != nil {
			return 0, c.err
		}
		return 0, fmt.Errorf("unknown pgoutput message type %q", t)
	}
	if c.err != nil {
		return 0, c.err
	}
	return c.off, nil
}

// cursor reads a message; past the buffer's end it sets err to errShort.
type cursor struct {
	b   []byte
	off int
	err error
}

func (c *cursor) need(n int) bool {
	if c.err == nil && (n < 0 || c.off+n > len(c.b)) {
		c.err = errShort
	}
	return c.err == nil
}

func (c *cursor) skip(n int) {
	if c.need(n) {
		c.off += n
	}
}

func (c *cursor) peek() byte {
	if !c.need(1) {
		return 0
	}
	return c.b[c.off]
}

func (c *cursor) byte() byte {
	v := c.peek()
	c.skip(1)
	return v
}

func (c *cursor) uint16() uint16 {
	if !c.need(2) {
		return 0
	}
	v := binary.BigEndian.Uint16(c.b[c.off:])
	c.off += 2
	return v
}

func (c *cursor) uint32() uint32 {
	if !c.need(4) {
		return 0
	}
	v := binary.BigEndian.Uint32(c.b[c.off:])
	c.off += 4
	return v
}

func (c *cursor) cstring() {
	if c.err != nil {
		return
	}
	i := bytes.IndexByte(c.b[c.off:], 0)
	if i < 0 {
		c.err = errShort
		return
	}
	c.off += i + 1
}

// tuple skips a TupleData: a column count, then per column a kind ('n' null, 'u'
// unchanged toast, 't' text and 'b' binary with a length and the value).
func (c *cursor) tuple() {
	for n := c.uint16(); n > 0 && c.err == nil; n-- {
		switch c.byte() {
		case 't', 'b':
			c.skip(int(c.uint32()))
		case 'n', 'u':
		default:
			if c.err == nil {
				c.err = fmt.Errorf("invalid tuple column kind at byte %d", c.off-1)
			}
		}
	}
}

// maxMessage bounds a pgoutput message (a row) that messageReader reads.
const maxMessage = 8 << 20

// messageReader splits pg_recvlogical's output of pgoutput into messages.
type messageReader struct{ r *bufio.Reader }

func newMessageReader(r io.Reader) *messageReader {
	return &messageReader{r: bufio.NewReaderSize(r, maxMessage+1)}
}

// next returns the next message (valid until the following call), io.EOF at the end of
// the output, an error when the output is not a sequence of pgoutput messages each
// followed by a newline.
func (m *messageReader) next() ([]byte, error) {
	for want := 1; ; {
		b, err := m.r.Peek(want) // reads more only when fewer than want bytes are buffered
		if len(b) < want {
			if err == io.EOF && len(b) > 0 {
				err = io.ErrUnexpectedEOF
			}
			return nil, err
		}
		b, _ = m.r.Peek(m.r.Buffered())
		l, err := pgoutputLen(b)
		switch {
		case err == nil && l < len(b):
			if b[l] != '\n' {
				return nil, fmt.Errorf("pgoutput message of %d bytes not followed by a newline", l)
			}
			_, _ = m.r.Discard(l + 1)
			return b[:l], nil
		case err == nil || errors.Is(err, errShort):
			if len(b) > maxMessage {
				return nil, fmt.Errorf("pgoutput message larger than %d bytes", maxMessage)
			}
			want = len(b) + 1
		default:
			return nil, err
		}
	}
}
