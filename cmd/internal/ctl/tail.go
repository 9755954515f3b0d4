package ctl

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/IBM/sarama"
	"go.yaml.in/yaml/v3"

	"github.com/statecast/statecast/distributor"
	"github.com/statecast/statecast/internal/daemon"
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
//
// A compacted topic keeps only the last position record (they share one key) and the last
// record of each row: the transactions of its older part have lost their position records
// and some of their rows. The Printer reports what the log shows rather than merge them
// into one transaction that never existed. The records of one source transaction share its
// source position (sc-source-lsn; the source time when polling): a txn record of another
// one while a transaction is open means the position record between them was compacted
// away, and the Printer says so there,
//
//	^ compaction removed the position record that ended the source transaction of the 2 records above (source position 0/10)
//
// and counts the next transaction from there. A position record whose source position is
// not the open transaction's says the same of it, and one whose transaction lost records
// (offsets missing between its records, more than the one a Kafka transaction's commit
// marker takes) says how many records are left of it.
type Printer struct {
	W        io.Writer
	MaxValue int
	// Idle writes every position record, the idle ones too.
	Idle bool

	open    int    // records since the last position record
	idle    int    // idle position records left out since the last one written
	idleLSN string // the source position of the last one left out

	// The open source transaction: its txn records' source position and time (txnID:
	// a txn record was seen), and whether offsets are missing between its records.
	txnID   bool
	txnLSN  string
	txnTime time.Time
	holes   bool
	lost    bool  // this position record's own transaction left no record
	last    int64 // the offset of the last record accounted, once started
	started bool
}

// compactedNote is what the Printer writes where compaction removed a transaction's end.
const compactedNote = "        ^ compaction removed the position record that ended the source transaction of %s above%s\n"

// account counts r in the open source transaction and returns the note to write before r
// when r shows that compaction removed the open transaction's position record ("" none).
func (p *Printer) account(r Record) string {
	missing := int64(0)
	if p.started {
		missing = r.Offset - p.last - 1
	}
	p.started, p.last = true, r.Offset
	if r.Err != nil {
		p.open++
		return ""
	}
	if r.Meta.Kind == record.KindPosition {
		note := ""
		if p.txnID && r.Meta.SourceLSN != "" && p.txnLSN != "" && r.Meta.SourceLSN != p.txnLSN {
			note = fmt.Sprintf(compactedNote, records(p.open), " (source position "+p.txnLSN+")")
			p.open, p.lost = 0, true
		} else if p.open > 0 && missing > 1 {
			p.holes = true
		}
		return note
	}
	note := ""
	if r.Meta.Txn {
		if p.txnID && (r.Meta.SourceLSN != p.txnLSN || (p.txnLSN == "" && !r.Meta.SourceTime.Equal(p.txnTime))) {
			where := ""
			if p.txnLSN != "" {
				where = " (source position " + p.txnLSN + ")"
			}
			note = fmt.Sprintf(compactedNote, records(p.open), where)
			p.open, p.holes = 0, false
			missing = 0
		}
		if !p.txnID || note != "" {
			p.txnID, p.txnLSN, p.txnTime = true, r.Meta.SourceLSN, r.Meta.SourceTime
		}
	}
	if p.open > 0 && missing > 1 {
		p.holes = true
	}
	p.open++
	return note
}

// endTxn forgets the open source transaction (a position record ended it).
func (p *Printer) endTxn() {
	p.open, p.txnID, p.txnLSN, p.txnTime, p.holes, p.lost = 0, false, "", time.Time{}, false, false
}

func records(n int) string {
	if n == 1 {
		return "the 1 record"
	}
	return fmt.Sprintf("the %d records", n)
}

// Skip accounts for a record that the caller does not print (the demo hides the rows of
// the start-up snapshot): it counts in the source transaction the next position record
// ends.
func (p *Printer) Skip(r Record) {
	note := p.account(r)
	if r.Err == nil && r.Meta.Kind == record.KindPosition {
		p.endTxn()
	}
	if note != "" {
		_, _ = io.WriteString(p.W, note)
	}
}

// Print writes one record (or, for an idle position record, counts it).
func (p *Printer) Print(r Record) error {
	var b strings.Builder
	b.WriteString(p.account(r))
	if r.Err == nil && r.Meta.Kind == record.KindPosition {
		n, holes, lost := p.open, p.holes, p.lost
		p.endTxn()
		if n == 0 && !p.Idle && b.Len() == 0 {
			p.idle++
			if pos, err := record.ParsePosition(r.Value); err == nil {
				p.idleLSN = pos.LSN
			}
			return nil
		}
		text := positionText(r.Value, n)
		if lost {
			text = strings.Replace(text, ": idle", ": ends a source transaction that compaction removed whole", 1)
		}
		fmt.Fprintf(&b, "%6d  %-11s %-14s %s", r.Offset, r.Meta.Kind, "-", text)
		if holes {
			b.WriteString(" (what compaction left of it: offsets are missing between its records)")
		}
		if p.idle > 0 {
			fmt.Fprintf(&b, " (%s before it not shown)", idleRecords(p.idle))
			p.idle = 0
		}
		b.WriteByte('\n')
		_, err := io.WriteString(p.W, b.String())
		return err
	}
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

// KafkaFromConfig returns the Kafka connection (brokers, client_id, timeout, tls, sasl)
// of the kafka section of a distributor's or a player's config file, read as the daemons
// read it (unknown fields are errors, ${NAME} is expanded). The rest of the file is not
// read, so that it needs none of the other sections' variables (the distributor's
// PostgreSQL DSN). The section's producer settings (compression, max_message_bytes) are
// accepted and not used.
func KafkaFromConfig(path string) (kafkaconn.Config, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return kafkaconn.Config{}, fmt.Errorf("ctl: %w", err)
	}
	var doc struct {
		Kafka yaml.Node `yaml:"kafka"`
	}
	if err := yaml.Unmarshal(b, &doc); err != nil {
		return kafkaconn.Config{}, fmt.Errorf("ctl: %s: %w", path, err)
	}
	if doc.Kafka.Kind == 0 {
		return kafkaconn.Config{}, fmt.Errorf("ctl: %s has no kafka section (a distributor's or a player's config has one)", path)
	}
	section, err := yaml.Marshal(&doc.Kafka)
	if err != nil {
		return kafkaconn.Config{}, fmt.Errorf("ctl: %s: kafka: %w", path, err)
	}
	// The distributor's section is the connection and its producer's settings; a
	// player's is the connection alone.
	var kc distributor.KafkaConfig
	if err := daemon.DecodeYAML(section, &kc); err != nil {
		return kafkaconn.Config{}, fmt.Errorf("ctl: %s: kafka section (line %d): %w", path, doc.Kafka.Line, err)
	}
	if len(kc.Brokers) == 0 {
		return kafkaconn.Config{}, fmt.Errorf("ctl: %s: kafka.brokers is empty", path)
	}
	return kc.Config, nil
}
