package distributor

import (
	"testing"

	"github.com/twmb/franz-go/pkg/kfake"
)

// TestEmbeddedBroker: the distributor also runs against the in-process kfake broker that
// `cachectl dev` embeds (snapshot, then restart without republishing).
func TestEmbeddedBroker(t *testing.T) {
	c, err := kfake.NewCluster(kfake.NumBrokers(1))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	e := newEnv(t)
	e.brokers = c.ListenAddrs()
	e.createItems()
	cfg := e.config(itemsView())
	r := start(t, cfg)
	r.waitReady(t)
	r.stop(t)
	r2 := start(t, cfg)
	r2.waitReady(t)
	r2.stop(t)
	recs := readAll(t, e.brokers, e.topic)
	if len(rowsOf(recs, "items")) != 3 {
		t.Fatalf("topic:\n%s", dump(recs))
	}
	if end := lastEnd(t, recs, "items"); end.Epoch != 2 || end.Published != 0 {
		t.Fatalf("restart epoch-end %+v", end)
	}
}
