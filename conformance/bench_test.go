package conformance

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/IBM/sarama"

	"github.com/statecast/statecast/internal/testenv"
	"github.com/statecast/statecast/kafkaconn"
	"github.com/statecast/statecast/schemas/record"
	"github.com/statecast/statecast/schemas/record/recordsarama"
)

func envInt(name string, def int) int {
	if v, err := strconv.Atoi(os.Getenv(name)); err == nil && v > 0 {
		return v
	}
	return def
}

// BenchmarkColdStart fills a topic with CONF_BENCH_RECORDS records (default 3× the keys)
// over CONF_BENCH_KEYS keys (default 1,000,000) of one view, then measures in the same
// run: a plain sarama consumer replaying the partition from offset 0 into a map (the
// baseline), and each client's driver (Go, Java) from its client's start to ready
// (snapshot bootstrap from an in-process player started after the replay), as the driver
// measures it, and from the process's start (the JVM's start-up included; the Java client
// twice: on its default transport, Netty, and on OkHttp); then each
// client's restart from the state file its previous process wrote at close (a client with
// a state directory takes a snapshot, closes, and starts again), start to ready.
//
// Run: CONF_JAVA_OPTS= go test -run '^$' -bench ColdStart -benchtime 1x -timeout 60m ./conformance/
// (CONF_JAVA_OPTS empty: the JVM's defaults rather than the scenarios' start-up flags).
func BenchmarkColdStart(b *testing.B) {
	keys := envInt("CONF_BENCH_KEYS", 1_000_000)
	records := envInt("CONF_BENCH_RECORDS", 3*keys)
	brokers := testenv.KafkaBrokers(b)
	topic := testenv.NewTopic(b, "conformance-bench", map[string]string{"cleanup.policy": "compact"})
	prod, err := sarama.NewSyncProducer(brokers, kafkaconn.ProducerConfig("conformance-bench"))
	if err != nil {
		b.Fatal(err)
	}
	start := time.Now()
	meta := record.Meta{View: "events", Kind: record.KindRow, Epoch: 1, SourceTime: time.Now(), SourceLSN: "0/1"}
	msgs := make([]*sarama.ProducerMessage, 0, 5000)
	for i := range records {
		k := i % keys
		v := fmt.Appendf(nil, `{"id":%d,"sport":"sport-%d","name":"event %d generation %d"}`, k, k%50, k, i/keys)
		msgs = append(msgs, recordsarama.ProducerMessage(topic, record.EncodeKey("events", strconv.Itoa(k)), v, meta))
		if len(msgs) == cap(msgs) || i == records-1 {
			if err := prod.SendMessages(msgs); err != nil {
				b.Fatal(err)
			}
			msgs = msgs[:0]
		}
	}
	prod.Close()
	b.Logf("produced %d records over %d keys in %v", records, keys, time.Since(start).Round(time.Millisecond))

	b.ResetTimer()
	tReplay := replay(b, brokers, topic, keys)
	e := &env{brokers: brokers, topic: topic}
	addr, _ := startPlayer(b, e, nil)
	report := map[string][2]time.Duration{}
	for _, cl := range clients {
		c := cl.make(b)
		pstart := time.Now()
		p := c.start(b, driverConfig{Addresses: []string{addr}, Stream: "s", Views: []string{"events"}, NoListener: true})
		ev := p.next(30*time.Minute, "ready")
		wall := time.Since(pstart)
		d := p.dump()
		if n := len(d.Views["events"]); n != keys {
			b.Fatalf("%s client holds %d keys, want %d", cl.name, n, keys)
		}
		p.close()
		report[cl.name] = [2]time.Duration{time.Duration(ev.Elapsed) * time.Millisecond, wall}
	}
	restart := map[string][2]time.Duration{}
	for _, cl := range clients {
		c := cl.make(b)
		cfg := driverConfig{Addresses: []string{addr}, Stream: "s", Views: []string{"events"}, NoListener: true,
			StateDir: b.TempDir(), PersistMillis: 3_600_000}
		p := c.start(b, cfg)
		p.next(30*time.Minute, "ready")
		cstart := time.Now()
		p.close() // writes the state file
		closed := time.Since(cstart)
		p = c.start(b, cfg)
		ev := p.next(30*time.Minute, "ready")
		if n := len(p.dump().Views["events"]); n != keys {
			b.Fatalf("%s client restarted from its state file holds %d keys, want %d", cl.name, n, keys)
		}
		for _, l := range strings.Split(p.stderr.String(), "\n") {
			if strings.Contains(l, "state file loaded") {
				b.Logf("%s client's log: %s", cl.name, l)
			}
		}
		p.close()
		restart[cl.name] = [2]time.Duration{time.Duration(ev.Elapsed) * time.Millisecond, closed}
	}
	b.StopTimer()
	for name, r := range restart {
		b.ReportMetric(r[0].Seconds(), name+"-restart-s")
		b.ReportMetric(tReplay.Seconds()/r[0].Seconds(), "replay/"+name+"-restart")
		b.Logf("%s client: restart from its state file %v (%.2f× the replay); the close that wrote it took %v",
			name, r[0], tReplay.Seconds()/r[0].Seconds(), r[1].Round(time.Millisecond))
	}
	b.ReportMetric(tReplay.Seconds(), "replay-s")
	for name, r := range report {
		b.ReportMetric(r[0].Seconds(), name+"-cold-s")
		b.ReportMetric(tReplay.Seconds()/r[0].Seconds(), "replay/"+name)
	}
	g, j, o := report["go"], report["java"], report["java-okhttp"]
	b.Logf("keys %d records %d: replay %v; go client %v (process %v); java client %v (process %v, JVM start-up included); java/go %.3f; "+
		"java client on the OkHttp transport %v (process %v); java-okhttp/go %.3f",
		keys, records, tReplay.Round(time.Millisecond), g[0], g[1].Round(time.Millisecond), j[0], j[1].Round(time.Millisecond),
		g[0].Seconds()/j[0].Seconds(), o[0], o[1].Round(time.Millisecond), g[0].Seconds()/o[0].Seconds())
}

// replay is the baseline: a plain consumer reading the partition from offset 0 to its end
// into a map of the row's JSON text.
func replay(b testing.TB, brokers []string, topic string, keys int) time.Duration {
	start := time.Now()
	c, err := sarama.NewConsumer(brokers, kafkaconn.NewConfig("conformance-bench-replay"))
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	client, err := sarama.NewClient(brokers, kafkaconn.NewConfig("conformance-bench-hwm"))
	if err != nil {
		b.Fatal(err)
	}
	end, err := client.GetOffset(topic, 0, sarama.OffsetNewest)
	client.Close()
	if err != nil {
		b.Fatal(err)
	}
	pc, err := c.ConsumePartition(topic, 0, sarama.OffsetOldest)
	if err != nil {
		b.Fatal(err)
	}
	defer pc.Close()
	m := map[string]string{}
	for msg := range pc.Messages() {
		if msg.Value == nil {
			delete(m, string(msg.Key))
		} else {
			m[string(msg.Key)] = string(msg.Value)
		}
		if msg.Offset+1 >= end {
			break
		}
	}
	if len(m) != keys {
		b.Fatalf("replay holds %d keys, want %d", len(m), keys)
	}
	return time.Since(start)
}
