package ctl

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"github.com/IBM/sarama"
	"github.com/twmb/franz-go/pkg/kfake"

	"github.com/statecast/statecast/kafkaconn"
	"github.com/statecast/statecast/schemas/record"
	"github.com/statecast/statecast/schemas/record/recordsarama"
)

func TestTailToEnd(t *testing.T) {
	b, err := kfake.NewCluster(kfake.NumBrokers(1))
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	// An empty topic: Tail without Follow returns at once.
	admin, err := sarama.NewClusterAdmin(b.ListenAddrs(), kafkaconn.NewConfig("tail-test"))
	if err != nil {
		t.Fatal(err)
	}
	if err := admin.CreateTopic("s", &sarama.TopicDetail{NumPartitions: 1, ReplicationFactor: 1}, false); err != nil {
		t.Fatal(err)
	}
	_ = admin.Close()
	n := 0
	if err := Tail(ctx, TailOptions{Brokers: b.ListenAddrs(), Topic: "s", From: sarama.OffsetOldest}, func(Record) error { n++; return nil }); err != nil || n != 0 {
		t.Fatalf("empty topic: %d records, %v", n, err)
	}

	p, err := sarama.NewSyncProducer(b.ListenAddrs(), kafkaconn.ProducerConfig("tail-test"))
	if err != nil {
		t.Fatal(err)
	}
	meta := record.Meta{View: "v", Kind: record.KindRow, Epoch: 2}
	end := &record.EpochEnd{Epoch: 2, Rows: 1}
	msgs := []*sarama.ProducerMessage{
		recordsarama.ProducerMessage("s", record.EncodeKey("v", "1"), []byte(`{"id":1,"n":"é✓"}`), meta),
		recordsarama.ProducerMessage("s", record.EncodeKey("v", "2"), nil, meta),
		recordsarama.ProducerMessage("s", record.ControlKey("v", record.KindEpochEnd), end.Marshal(),
			record.Meta{View: "v", Kind: record.KindEpochEnd, Epoch: 2}),
		{Topic: "s", Key: sarama.StringEncoder("foreign")},
		recordsarama.ProducerMessage("s", record.EncodeKey("v", "3"), []byte(`{}`), record.Meta{View: "v", Kind: record.KindRow, Epoch: 2, Txn: true}),
		recordsarama.ProducerMessage("s", record.PositionKey(),
			(&record.Position{LSN: "16/B374D848", Time: time.Date(2026, 11, 29, 19, 25, 6, 0, time.UTC), Stale: []string{"w"}}).Marshal(),
			record.Meta{Kind: record.KindPosition, SourceLSN: "16/B374D848"}),
		recordsarama.ProducerMessage("s", record.PositionKey(), (&record.Position{}).Marshal(), record.Meta{Kind: record.KindPosition}),
	}
	if err := p.SendMessages(msgs); err != nil {
		t.Fatal(err)
	}
	_ = p.Close()

	// By default the idle position record (nothing since the previous one) is only
	// counted, and Flush says so; with Idle it is written.
	for _, idle := range []bool{false, true} {
		var out bytes.Buffer
		pr := Printer{W: &out, MaxValue: 16, Idle: idle}
		if err := Tail(ctx, TailOptions{Brokers: b.ListenAddrs(), Topic: "s", From: sarama.OffsetOldest}, pr.Print); err != nil {
			t.Fatal(err)
		}
		if err := pr.Flush(); err != nil {
			t.Fatal(err)
		}
		last := "        (1 idle position record not shown)"
		if idle {
			last = "position    -              no source position: idle"
		}
		lines := strings.Split(strings.TrimSpace(out.String()), "\n")
		if len(lines) != 7 {
			t.Fatalf("idle %v: printed %d lines:\n%s", idle, len(lines), out.String())
		}
		for i, want := range []string{
			`v|1  {"id":1,"n":"é…`, // cut on a rune boundary
			"v|2  <tombstone>",
			`!ctl|v|end  {"epoch":2,"rows…`,
			"foreign  !! record: bad header: missing sc-view",
			"epoch=2   txn v|3  {}",
			"position    -              source position 16/B374D848 at 2026-11-29T19:25:06Z: ends a source transaction of 5 records [stale: w]",
			strings.TrimSpace(last),
		} {
			if !strings.HasSuffix(lines[i], want) {
				t.Errorf("idle %v: line %d = %q, want suffix %q", idle, i, lines[i], want)
			}
		}
	}
	// From an offset in the middle.
	var keys []string
	if err := Tail(ctx, TailOptions{Brokers: b.ListenAddrs(), Topic: "s", From: 2}, func(r Record) error {
		keys = append(keys, string(r.Key))
		return nil
	}); err != nil || strings.Join(keys, ",") != "!ctl|v|end,foreign,v|3,!ctl|position,!ctl|position" {
		t.Fatalf("from 2: %q, %v", keys, err)
	}
}
