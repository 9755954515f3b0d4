package ctl

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/IBM/sarama"
	"github.com/twmb/franz-go/pkg/kfake"

	"github.com/statecast/statecast/kafkaconn"
	"github.com/statecast/statecast/schemas/record"
	"github.com/statecast/statecast/schemas/record/recordsarama"
)

// txnRow is a row record of a source transaction at source position lsn.
func txnRow(offset int64, key, lsn string, at time.Time) Record {
	return Record{Offset: offset, Key: record.EncodeKey("v", key), Value: []byte(`{}`),
		Meta: record.Meta{View: "v", Kind: record.KindRow, Epoch: 1, Txn: true, SourceLSN: lsn, SourceTime: at}}
}

// positionAt is a position record at source position lsn (polling: lsn "").
func positionAt(offset int64, lsn string) Record {
	return Record{Offset: offset, Key: record.PositionKey(), Value: (&record.Position{LSN: lsn}).Marshal(),
		Meta: record.Meta{Kind: record.KindPosition, SourceLSN: lsn}}
}

func printAll(t *testing.T, rs ...Record) []string {
	t.Helper()
	var out bytes.Buffer
	p := &Printer{W: &out}
	for _, r := range rs {
		if err := p.Print(r); err != nil {
			t.Fatal(err)
		}
	}
	return strings.Split(strings.TrimRight(out.String(), "\n"), "\n")
}

// TestPrinterCompactedBoundaries: the Printer says where compaction removed a source
// transaction's position record, instead of counting the records of several transactions
// as one; an uncompacted log (offsets that skip only the commit markers of Kafka
// transactions) gets no such note.
func TestPrinterCompactedBoundaries(t *testing.T) {
	t0 := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	t1 := t0.Add(time.Second)
	const removed = "^ compaction removed the position record that ended the source transaction of "
	tests := []struct {
		name string
		rs   []Record
		want []string // a suffix of each line, in order
	}{{
		name: "whole: commit markers between transactions",
		rs:   []Record{txnRow(0, "1", "0/10", t0), txnRow(1, "2", "0/10", t0), positionAt(2, "0/10"), txnRow(4, "3", "0/20", t0), positionAt(5, "0/20")},
		want: []string{"txn v|1  {}", "txn v|2  {}", "source position 0/10: ends a source transaction of 2 records", "txn v|3  {}", "source position 0/20: ends a source transaction of 1 record"},
	}, {
		name: "a position record compacted away",
		rs:   []Record{txnRow(1, "2", "0/10", t0), txnRow(5, "1", "0/30", t0), txnRow(6, "3", "0/30", t0), positionAt(8, "0/30")},
		want: []string{"txn v|2  {}", removed + "the 1 record above (source position 0/10)", "txn v|1  {}", "txn v|3  {}", "source position 0/30: ends a source transaction of 2 records"},
	}, {
		name: "polling: the source time tells the transactions apart",
		rs:   []Record{txnRow(0, "1", "", t0), txnRow(3, "2", "", t1), positionAt(4, "")},
		want: []string{"txn v|1  {}", removed + "the 1 record above", "txn v|2  {}", "no source position: ends a source transaction of 1 record"},
	}, {
		name: "a transaction that lost rows",
		rs:   []Record{txnRow(0, "1", "0/10", t0), txnRow(7, "2", "0/10", t0), positionAt(8, "0/10")},
		want: []string{"txn v|1  {}", "txn v|2  {}", "ends a source transaction of 2 records (what compaction left of it: offsets are missing between its records)"},
	}, {
		name: "a position record whose transaction compaction removed whole",
		rs:   []Record{txnRow(0, "1", "0/10", t0), positionAt(6, "0/20")},
		want: []string{"txn v|1  {}", removed + "the 1 record above (source position 0/10)", "source position 0/20: ends a source transaction that compaction removed whole"},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			lines := printAll(t, tt.rs...)
			if len(lines) != len(tt.want) {
				t.Fatalf("%d lines, want %d:\n%s", len(lines), len(tt.want), strings.Join(lines, "\n"))
			}
			for i, want := range tt.want {
				if !strings.HasSuffix(lines[i], want) {
					t.Errorf("line %d = %q, want the suffix %q", i, lines[i], want)
				}
			}
		})
	}
}

// TestTailCompactedTopic: on a compacted topic of the embedded broker, which keeps only
// the last position record it compacted, tail reports the source transactions the log
// still shows apart, not one transaction of every row before that position record.
func TestTailCompactedTopic(t *testing.T) {
	b, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.BrokerConfigs(map[string]string{"log.cleaner.backoff.ms": "50"}))
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	admin, err := sarama.NewClusterAdmin(b.ListenAddrs(), kafkaconn.NewConfig("tail-test"))
	if err != nil {
		t.Fatal(err)
	}
	compact := "compact"
	if err := admin.CreateTopic("s", &sarama.TopicDetail{NumPartitions: 1, ReplicationFactor: 1,
		ConfigEntries: map[string]*string{"cleanup.policy": &compact}}, false); err != nil {
		t.Fatal(err)
	}
	_ = admin.Close()
	prod, err := sarama.NewSyncProducer(b.ListenAddrs(), kafkaconn.ProducerConfig("tail-test"))
	if err != nil {
		t.Fatal(err)
	}
	defer prod.Close()
	// Four source transactions: T1 {1, 2}, T2 {3}, T3 {1, 3} (which replaces T2's only
	// row), T4 {4}; each ends with a position record, and every record is a batch of its
	// own (compaction keeps the last batch as it is).
	at := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	for i, txn := range [][]string{{"1", "2"}, {"3"}, {"1", "3"}, {"4"}} {
		lsn := "0/" + strconv.Itoa(10*(i+1))
		var msgs []*sarama.ProducerMessage
		for _, k := range txn {
			msgs = append(msgs, recordsarama.ProducerMessage("s", record.EncodeKey("v", k), []byte(`{}`),
				record.Meta{View: "v", Kind: record.KindRow, Epoch: 1, Txn: true, SourceLSN: lsn, SourceTime: at}))
		}
		msgs = append(msgs, recordsarama.ProducerMessage("s", record.PositionKey(), (&record.Position{LSN: lsn}).Marshal(),
			record.Meta{Kind: record.KindPosition, SourceLSN: lsn, SourceTime: at}))
		for _, m := range msgs {
			if _, _, err := prod.SendMessage(m); err != nil {
				t.Fatal(err)
			}
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var out bytes.Buffer
	for deadline := time.Now().Add(30 * time.Second); ; {
		var offsets []int64
		out.Reset()
		p := &Printer{W: &out}
		if err := Tail(ctx, TailOptions{Brokers: b.ListenAddrs(), Topic: "s", From: sarama.OffsetOldest}, func(r Record) error {
			offsets = append(offsets, r.Offset)
			return p.Print(r)
		}); err != nil {
			t.Fatal(err)
		}
		// v|2 of T1; v|1, v|3 and the position of T3; v|4 and the position of T4 (the last
		// batch is not compacted, so T3's position record is the last one compaction saw).
		if len(offsets) == 6 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("not compacted after 30s: offsets %v", offsets)
		}
		time.Sleep(50 * time.Millisecond)
	}
	text := out.String()
	for _, want := range []string{
		"compaction removed the position record that ended the source transaction of the 1 record above (source position 0/10)",
		"source position 0/30: ends a source transaction of 2 records\n",
		"source position 0/40: ends a source transaction of 1 record\n",
	} {
		if !strings.Contains(text, want) {
			t.Errorf("tail lacks %q:\n%s", want, text)
		}
	}
	if strings.Contains(text, "of 3 records") {
		t.Errorf("tail merged the compacted transactions into one:\n%s", text)
	}
}

// TestKafkaFromConfig: the kafka section of a distributor's or a player's file, expanded as
// the daemons expand it, without the variables of the other sections; a file without one,
// or with a field the section does not have, is an error naming the file.
func TestKafkaFromConfig(t *testing.T) {
	t.Setenv("TAIL_TEST_BROKER", "k2:9092")
	for _, tt := range []struct {
		name, yaml, want, err string
	}{
		{"distributor", "postgres:\n  dsn: ${TAIL_TEST_NOT_SET}\nkafka:\n  brokers: [k1:9092]\n  compression: zstd\n  sasl: {mechanism: PLAIN, user: u, password: p}\n  tls: {enabled: true}\nstreams: []\n", "k1:9092", ""},
		{"player", "kafka: {brokers: [k1:9092, \"${TAIL_TEST_BROKER}\"]}\nstreams: [{name: s}]\n", "k1:9092,k2:9092", ""},
		{"no kafka", "streams: [{name: s}]\n", "", "has no kafka section"},
		{"unknown field", "kafka: {brokers: [k1:9092], colour: red}\n", "", "colour"},
		{"unset variable", "kafka: {brokers: [\"${TAIL_TEST_NOT_SET}\"]}\n", "", "TAIL_TEST_NOT_SET"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), tt.name+".yaml")
			if err := os.WriteFile(path, []byte(tt.yaml), 0o600); err != nil {
				t.Fatal(err)
			}
			kc, err := KafkaFromConfig(path)
			if tt.err != "" {
				if err == nil || !strings.Contains(err.Error(), tt.err) || !strings.Contains(err.Error(), path) {
					t.Fatalf("err = %v, want one naming %s and %q", err, path, tt.err)
				}
				return
			}
			if err != nil || strings.Join(kc.Brokers, ",") != tt.want {
				t.Fatalf("brokers %v, %v; want %s", kc.Brokers, err, tt.want)
			}
		})
	}
}
