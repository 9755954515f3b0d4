package distributor

import (
	"strings"
	"testing"

	"github.com/statecast/statecast/internal/testenv"
)

// TestKafkaSASLSSL: the distributor publishes through the real broker's SASL_SSL listener
// (TLS verified with the test CA, SCRAM-SHA-512) — every one of its Kafka clients: topic
// admin, start-up read-back, producer — and a change made afterwards arrives too.
func TestKafkaSASLSSL(t *testing.T) {
	e := newEnv(t)
	conn := testenv.KafkaSASL(t)
	e.createItems()
	cfg := e.config(itemsView())
	conn.ClientID = "test-sasl"
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
