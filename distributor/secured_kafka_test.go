package distributor

import (
	"strings"
	"testing"

	"github.com/statecast/statecast/internal/testenv"
	"github.com/statecast/statecast/kafkaconn"
)

// TestKafkaSecured: the distributor publishes through each of the real broker's secured
// listeners — SASL_SSL (TLS verified with the test CA, SCRAM-SHA-512) and mutual TLS (a
// client certificate) — with every one of its Kafka clients: topic admin, start-up
// read-back, producer; a change made afterwards arrives too.
func TestKafkaSecured(t *testing.T) {
	for _, l := range testenv.KafkaSecured(t) {
		t.Run(l.Name, func(t *testing.T) { testKafkaSecured(t, l.Conn) })
	}
}

func testKafkaSecured(t *testing.T, conn kafkaconn.Config) {
	e := newEnv(t)
	e.createItems()
	cfg := e.config(itemsView())
	conn.ClientID = "test-secured"
	cfg.Kafka.Config = conn
	r := start(t, cfg)
	r.waitReady(t)
	waitFor(t, e, "the start-up epoch", func(recs []rec) bool { return len(rowsOf(recs, "items")) == 3 })
	e.exec(`UPDATE items SET name = 'quince', updated_at = clock_timestamp() WHERE id = 1`)
	waitFor(t, e, "the update", func(recs []rec) bool {
		for _, v := range rowsOf(recs, "items") {
			if strings.Contains(v, "quince") {
				return true
			}
		}
		return false
	})
	r.stop(t)
	// A restart reads its state back from the topic through the same listener.
	r = start(t, cfg)
	r.waitReady(t)
}
