package distributor

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
)

// TestPollRetry: a poll that fails at run time (here: the table is gone) is counted and
// retried with backoff; once the table is back the pending change is published.
func TestPollRetry(t *testing.T) {
	e := newEnv(t)
	e.createItems()
	r := start(t, e.config(itemsView()))
	r.waitReady(t)
	e.exec(`ALTER TABLE items RENAME TO items_gone`)
	errs := r.d.m.errors.WithLabelValues(e.topic, "items", "poll")
	waitCond(t, "poll errors counted", func() bool { return counterValue(errs) >= 2 })
	e.exec(`INSERT INTO items_gone (id, name) VALUES (40, 'while failing')`)
	e.exec(`ALTER TABLE items_gone RENAME TO items`)
	waitFor(t, e, "row 40 after recovery", func(recs []rec) bool { return rowsOf(recs, "items")["items|40"] != "" })
}

func counterValue(c prometheus.Counter) float64 {
	var m dto.Metric
	if err := c.Write(&m); err != nil {
		return 0
	}
	return m.GetCounter().GetValue()
}
