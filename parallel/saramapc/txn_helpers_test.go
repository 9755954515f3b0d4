package saramapc

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/IBM/sarama"

	"github.com/statecast/statecast/kafkaconn"
	"github.com/statecast/statecast/parallel"
)

// input is one record written to an input topic.
type input struct {
	partition int32
	offset    int64
	key       string
}

func (in input) id() string { return fmt.Sprintf("%d/%d", in.partition, in.offset) }

// produceHashed writes n records with keys k0..k{keys-1} to topic, partitioned by key.
func produceHashed(t testing.TB, brokers []string, topic string, n, keys int) []input {
	t.Helper()
	pc := kafkaconn.ProducerConfig("saramapc-test")
	pc.Producer.Partitioner = sarama.NewHashPartitioner
	p, err := sarama.NewSyncProducer(brokers, pc)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	msgs := make([]*sarama.ProducerMessage, n)
	for i := range msgs {
		msgs[i] = &sarama.ProducerMessage{Topic: topic, Key: sarama.StringEncoder(fmt.Sprintf("k%d", i%keys)), Value: sarama.StringEncoder(strconv.Itoa(i))}
	}
	if err := p.SendMessages(msgs); err != nil {
		t.Fatal(err)
	}
	ins := make([]input, n)
	for i, m := range msgs {
		ins[i] = input{partition: m.Partition, offset: m.Offset, key: fmt.Sprintf("k%d", i%keys)}
	}
	return ins
}

// echo is the output of an input record: same key, the input's partition/offset as value.
func echo(out *Producer, topic string, m Message) {
	out.Send(&sarama.ProducerMessage{Topic: topic, Key: sarama.ByteEncoder(m.Key), Value: sarama.StringEncoder(fmt.Sprintf("%d/%d", m.Partition, m.Offset))})
}

// output is one record read back from an output topic.
type output struct {
	partition int32
	offset    int64
	key       string
	value     string
	headers   map[string]string
}

// readCommitted reads every committed record of topic's partitions with read_committed: it
// writes a non-transactional end marker to each partition and reads up to it, so that every
// transaction that ended before is seen, and an open one blocks the read until it ends.
func readCommitted(t testing.TB, brokers []string, topic string) []output {
	t.Helper()
	cl, err := sarama.NewClient(brokers, kafkaconn.NewConfig("saramapc-test-reader"))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	parts, err := cl.Partitions(topic)
	if err != nil {
		t.Fatal(err)
	}
	prod, err := sarama.NewSyncProducer(brokers, kafkaconn.ProducerConfig("saramapc-test-marker")) // manual partitioner
	if err != nil {
		t.Fatal(err)
	}
	ends := map[int32]int64{}
	for _, p := range parts {
		_, off, err := prod.SendMessage(&sarama.ProducerMessage{Topic: topic, Partition: p, Key: sarama.StringEncoder("__end"), Value: sarama.StringEncoder("end")})
		if err != nil {
			t.Fatal(err)
		}
		ends[p] = off
	}
	_ = prod.Close()
	rc := kafkaconn.NewConfig("saramapc-test-reader")
	rc.Consumer.IsolationLevel = sarama.ReadCommitted
	c, err := sarama.NewConsumer(brokers, rc)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	var outs []output
	for _, p := range parts {
		pcns, err := c.ConsumePartition(topic, p, sarama.OffsetOldest)
		if err != nil {
			t.Fatal(err)
		}
		timeout := time.After(60 * time.Second)
	read:
		for {
			select {
			case m := <-pcns.Messages():
				if m.Offset >= ends[p] {
					break read
				}
				if string(m.Key) == "__end" {
					continue // an earlier read's marker
				}
				o := output{partition: p, offset: m.Offset, key: string(m.Key), value: string(m.Value), headers: map[string]string{}}
				for _, h := range m.Headers {
					o.headers[string(h.Key)] = string(h.Value)
				}
				outs = append(outs, o)
			case err := <-pcns.Errors():
				t.Fatalf("reading %s/%d: %v", topic, p, err)
			case <-timeout:
				t.Fatalf("reading %s/%d: end marker at %d not reached in 60s (an open transaction?)", topic, p, ends[p])
			}
		}
		_ = pcns.Close()
	}
	return outs
}

// checkExactlyOnce checks the outputs of echo: each input's output exactly once
// (unique, reliable), and for every key its outputs in input-offset order (ordered).
func checkExactlyOnce(t testing.TB, ins []input, outs []output) {
	t.Helper()
	seen := map[string]int{}
	lastByKey := map[string]input{}
	for _, o := range outs {
		seen[o.value]++
		var in input
		if _, err := fmt.Sscanf(o.value, "%d/%d", &in.partition, &in.offset); err != nil {
			t.Errorf("output %q: %v", o.value, err)
			continue
		}
		if prev, ok := lastByKey[o.key]; ok && prev.partition == in.partition && in.offset <= prev.offset {
			t.Errorf("ordered: key %s: output of %s after %s", o.key, in.id(), prev.id())
		}
		lastByKey[o.key] = in
	}
	missing, dup := 0, 0
	for _, in := range ins {
		switch n := seen[in.id()]; {
		case n == 0:
			missing++
			if missing <= 5 {
				t.Errorf("reliable: no output for input %s", in.id())
			}
		case n > 1:
			dup++
			if dup <= 5 {
				t.Errorf("unique: %d outputs for input %s", n, in.id())
			}
		}
	}
	if len(outs) != len(ins) {
		t.Errorf("%d outputs for %d inputs (%d missing, %d duplicated)", len(outs), len(ins), missing, dup)
	}
}

// waitAllCommitted polls the committed offsets of every partition of topic until each one is
// past the last input of that partition.
func waitAllCommitted(t testing.TB, cl sarama.Client, group, topic string, ins []input) {
	t.Helper()
	last := map[int32]int64{}
	for _, in := range ins {
		last[in.partition] = max(last[in.partition], in.offset)
	}
	deadline := time.Now().Add(90 * time.Second)
	for {
		done := true
		var state []string
		for p, off := range last {
			cp, err := FetchCheckpoint(cl, group, topic, p)
			if err != nil || cp.Watermark <= off {
				done = false
			}
			state = append(state, fmt.Sprintf("%d:%d/%d", p, cp.Watermark, off+1))
		}
		if done {
			return
		}
		if time.Now().After(deadline) {
			slices.Sort(state)
			t.Fatalf("timed out waiting for the commits of %s: %s", topic, strings.Join(state, " "))
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func txnConfig(brokers []string, group, topic string, h TxnHandler) Config {
	cfg := testConfig(brokers, group, topic, nil)
	cfg.Commit = CommitTransactional
	cfg.TxnHandler = h
	return cfg
}

// echoHandler sends each input's echo to topic.
func echoHandler(topic string) TxnHandler {
	return func(_ context.Context, r parallel.Record[Message], out *Producer) error {
		echo(out, topic, r.Value)
		return nil
	}
}
