package distributor

import (
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
)

// TestPollRetry: a view whose SQL fails at run time (here: the table is gone) is stopped,
// counted, and retried (full reads) with backoff; once the table is back it resumes
// without a restart and the pending change is published.
func TestPollRetry(t *testing.T) {
	e := newEnv(t)
	e.createItems()
	r := start(t, e.config(itemsView()))
	r.waitReady(t)
	e.exec(`ALTER TABLE items RENAME TO items_gone`)
	polls := r.d.m.errors.WithLabelValues(e.topic, "items", "poll")
	retries := r.d.m.errors.WithLabelValues(e.topic, "items", "reconcile")
	waitCond(t, "the failing poll and a failing retry counted", func() bool { return counterValue(polls) >= 1 && counterValue(retries) >= 1 })
	if st := r.d.Status()[0].Views[0]; !strings.Contains(st.Failed, "items") || st.FailedSince.IsZero() {
		t.Fatalf("status of the stopped view: %+v", st)
	}
	e.exec(`INSERT INTO items_gone (id, name) VALUES (40, 'while failing')`)
	e.exec(`ALTER TABLE items_gone RENAME TO items`)
	waitFor(t, e, "row 40 after recovery", func(recs []rec) bool { return rowsOf(recs, "items")["items|40"] != "" })
	waitCond(t, "the view resumed", func() bool { return r.d.Status()[0].Views[0].Failed == "" })
}

func counterValue(c prometheus.Counter) float64 {
	var m dto.Metric
	if err := c.Write(&m); err != nil {
		return 0
	}
	return m.GetCounter().GetValue()
}
