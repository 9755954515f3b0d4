package ctl

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"unicode/utf8"

	"github.com/IBM/sarama"

	"github.com/statecast/statecast/kafkaconn"
	"github.com/statecast/statecast/schemas/record"
	"github.com/statecast/statecast/schemas/record/recordsarama"
)

// Record is one record of a stream as Tail reports it.
type Record struct {
	Offset int64
	Meta   record.Meta
	Key    []byte
	Value  []byte // nil for a tombstone
	Err    error  // headers that do not parse (Meta is then partial)
}

// TailOptions says what Tail reads.
type TailOptions struct {
	Brokers []string
	// Kafka, when its Brokers are set, is the connection (TLS, SASL, timeout; validated
	// by the caller) and Brokers is not used.
	Kafka kafkaconn.Config
	Topic string
	From  int64 // first offset; sarama.OffsetOldest (-2) for the beginning
	// Follow keeps reading new records until ctx ends; otherwise Tail returns once it
	// reached the end offset taken when it started.
	Follow bool
}

// Tail reads partition 0 of a stream and calls fn with every record, in offset order, in
// the caller's goroutine. It returns nil when ctx ends (Follow) or the end is reached.
func Tail(ctx context.Context, o TailOptions, fn func(Record) error) error {
	conn := o.Kafka
	if len(conn.Brokers) == 0 {
		conn = kafkaconn.Config{Brokers: o.Brokers}
	}
	if conn.ClientID == "" {
		conn.ClientID = "statecast-tail"
	}
	client, err := sarama.NewClient(conn.Brokers, conn.SaramaConfig())
	if err != nil {
		return fmt.Errorf("ctl: kafka: %w", err)
	}
	defer client.Close()
	end, err := client.GetOffset(o.Topic, 0, sarama.OffsetNewest)
	if err != nil {
		return fmt.Errorf("ctl: end offset of %s: %w", o.Topic, err)
	}
	if !o.Follow {
		start, err := client.GetOffset(o.Topic, 0, sarama.OffsetOldest)
		if err != nil {
			return fmt.Errorf("ctl: start offset of %s: %w", o.Topic, err)
		}
		if end <= start || (o.From >= 0 && o.From >= end) {
			return nil
		}
	}
	cons, err := sarama.NewConsumerFromClient(client)
	if err != nil {
		return fmt.Errorf("ctl: consumer: %w", err)
	}
	defer cons.Close()
	next := o.From
	for {
		err := tailFrom(ctx, cons, o, next, end, fn, &next)
		if !errors.Is(err, sarama.ErrOffsetOutOfRange) {
			return err
		}
		// The embedded broker (kfake) moves the log start past what compaction removed;
		// a reader below it resumes at the new start (Apache Kafka never does this).
		start, serr := client.GetOffset(o.Topic, 0, sarama.OffsetOldest)
		if serr != nil {
			return fmt.Errorf("ctl: start offset of %s: %w", o.Topic, serr)
		}
		if next >= 0 && next >= start {
			return fmt.Errorf("ctl: consume %s at %d: %w", o.Topic, next, err)
		}
		next = start
	}
}

// tailFrom consumes from offset from, advancing *next past every record handed to fn.
func tailFrom(ctx context.Context, cons sarama.Consumer, o TailOptions, from, end int64, fn func(Record) error, next *int64) error {
	pc, err := cons.ConsumePartition(o.Topic, 0, from)
	if err != nil {
		return fmt.Errorf("ctl: consume %s: %w", o.Topic, err)
	}
	defer pc.Close()
	for {
		select {
		case <-ctx.Done():
			return nil
		case err := <-pc.Errors():
			return fmt.Errorf("ctl: consume %s: %w", o.Topic, err)
		case m := <-pc.Messages():
			*next = m.Offset + 1
			meta, merr := recordsarama.Meta(m)
			if err := fn(Record{Offset: m.Offset, Meta: meta, Key: m.Key, Value: m.Value, Err: merr}); err != nil {
				return err
			}
			if !o.Follow && m.Offset+1 >= end {
				return nil
			}
		}
	}
}

// Printer writes records one per line:
//
//	offset kind view epoch=N [txn] key value
//
// "txn" marks a record of a source transaction (applied with the others up to the next
// position record). A position record, which belongs to no view, is written readably,
// with the number of records of the source transaction it ends:
//
//	offset position - source position 16/B374D848 at 2026-11-29T19:25:06Z: ends a source transaction of 3 records [stale: v, …]
//
// An idle stream gets a position record whenever the database's WAL moves (up to every
// 100ms by default): a position record that ends no record is counted, not written, unless
// Idle is set; the next one written says how many it left out, and Flush writes the count
// of the last ones. Values longer than MaxValue bytes are cut (0: never). A Printer is
// used by one goroutine.
type Printer struct {
	W        io.Writer
	MaxValue int
	// Idle writes every position record, the idle ones too.
	Idle bool

	open    int    // records since the last position record
	idle    int    // idle position records left out since the last one written
	idleLSN string // the source position of the last one left out
}

// Skip accounts for a record that the caller does not print (the demo hides the rows of
// the start-up snapshot): it counts in the source transaction the next position record
// ends.
func (p *Printer) Skip(r Record) {
	if r.Err != nil || r.Meta.Kind != record.KindPosition {
		p.open++
	}
}

// Print writes one record (or, for an idle position record, counts it).
func (p *Printer) Print(r Record) error {
	var b strings.Builder
	if r.Err == nil && r.Meta.Kind == record.KindPosition {
		n := p.open
		p.open = 0
		if n == 0 && !p.Idle {
			p.idle++
			if pos, err := record.ParsePosition(r.Value); err == nil {
				p.idleLSN = pos.LSN
			}
			return nil
		}
		fmt.Fprintf(&b, "%6d  %-11s %-14s %s", r.Offset, r.Meta.Kind, "-", positionText(r.Value, n))
		if p.idle > 0 {
			fmt.Fprintf(&b, " (%s before it not shown)", idleRecords(p.idle))
			p.idle = 0
		}
		b.WriteByte('\n')
		_, err := io.WriteString(p.W, b.String())
		return err
	}
	p.open++
	txn := ""
	if r.Meta.Txn {
		txn = "txn"
	}
	fmt.Fprintf(&b, "%6d  %-11s %-14s epoch=%-3d %-3s %s", r.Offset, r.Meta.Kind, r.Meta.View, r.Meta.Epoch, txn, r.Key)
	switch {
	case r.Err != nil:
		fmt.Fprintf(&b, "  !! %v", r.Err)
	case r.Value == nil:
		b.WriteString("  <tombstone>")
	default:
		v := string(r.Value)
		if p.MaxValue > 0 && len(v) > p.MaxValue {
			n := p.MaxValue
			for n > 0 && !utf8.RuneStart(v[n]) {
				n--
			}
			v = v[:n] + "…"
		}
		b.WriteString("  ")
		b.WriteString(v)
	}
	b.WriteByte('\n')
	_, err := io.WriteString(p.W, b.String())
	return err
}

// Flush writes how many idle position records were left out since the last record
// written, if any.
func (p *Printer) Flush() error {
	if p.idle == 0 {
		return nil
	}
	last := ""
	if p.idleLSN != "" {
		last = ", the last at source position " + p.idleLSN
	}
	_, err := fmt.Fprintf(p.W, "        (%s not shown%s)\n", idleRecords(p.idle), last)
	p.idle = 0
	return err
}

func idleRecords(n int) string {
	if n == 1 {
		return "1 idle position record"
	}
	return fmt.Sprintf("%d idle position records", n)
}

// positionText renders a position record's value: its source position (or that it has
// none: polling), its time, the size of the source transaction it ends (n records) and
// its stale views.
func positionText(value []byte, n int) string {
	pos, err := record.ParsePosition(value)
	if err != nil {
		return fmt.Sprintf("!! %v", err)
	}
	var b strings.Builder
	if pos.LSN != "" {
		fmt.Fprintf(&b, "source position %s", pos.LSN)
	} else {
		b.WriteString("no source position")
	}
	if !pos.Time.IsZero() {
		fmt.Fprintf(&b, " at %s", record.FormatTime(pos.Time))
	}
	switch n {
	case 0:
		b.WriteString(": idle")
	case 1:
		b.WriteString(": ends a source transaction of 1 record")
	default:
		fmt.Fprintf(&b, ": ends a source transaction of %d records", n)
	}
	if len(pos.Stale) > 0 {
		fmt.Fprintf(&b, " [stale: %s]", strings.Join(pos.Stale, ", "))
	}
	return b.String()
}

// ErrStop may be returned by a Tail callback to stop reading; Tail then returns it.
var ErrStop = errors.New("ctl: stop")
