package distributor

import (
	"context"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/IBM/sarama"

	"github.com/statecast/statecast/schemas/record"
)

// kafkaGate is a sarama dialer whose connections can be held: while held, a write waits
// before it reaches the network — a black hole between the client and the broker, the
// request in flight for the client and unknown to the broker — and goes through when the
// gate is released, as a delayed packet would.
type kafkaGate struct {
	mu      sync.Mutex
	cond    *sync.Cond
	held    bool
	waiting int
}

func newKafkaGate() *kafkaGate {
	g := &kafkaGate{}
	g.cond = sync.NewCond(&g.mu)
	return g
}

// apply routes the connections of a sarama config through the gate.
func (g *kafkaGate) apply(c *sarama.Config) {
	c.Net.Proxy.Enable = true
	c.Net.Proxy.Dialer = g
}

func (g *kafkaGate) Dial(network, addr string) (net.Conn, error) {
	c, err := net.Dial(network, addr)
	if err != nil {
		return nil, err
	}
	return &gateConn{Conn: c, g: g}, nil
}

func (g *kafkaGate) hold() {
	g.mu.Lock()
	g.held = true
	g.mu.Unlock()
}

func (g *kafkaGate) release() {
	g.mu.Lock()
	g.held = false
	g.cond.Broadcast()
	g.mu.Unlock()
}

// waitHeld waits until a write is held.
func (g *kafkaGate) waitHeld(t *testing.T) {
	t.Helper()
	waitCond(t, "a write held by the gate", func() bool {
		g.mu.Lock()
		defer g.mu.Unlock()
		return g.waiting > 0
	})
}

type gateConn struct {
	net.Conn
	g *kafkaGate
}

func (c *gateConn) Write(b []byte) (int, error) {
	g := c.g
	g.mu.Lock()
	for g.held {
		g.waiting++
		g.cond.Wait()
		g.waiting--
	}
	g.mu.Unlock()
	return c.Conn.Write(b)
}

// TestFencedAfterLockLoss: the active distributor loses its lock while a send of it is in
// flight, held between it and the broker; the standby takes over, restores the stream and
// publishes its start-up epoch; then the old active's request reaches the broker. No record
// of the old active may be in the log after the new active's first record — its stale row
// would stay in every cache, and no later epoch would correct it since the new active's
// hashes already hold the newer value: the log's content would disagree with every
// epoch-end from then on, which is what the last check (a client's epoch-end hash check)
// sees.
func TestFencedAfterLockLoss(t *testing.T) {
	e := newEnv(t)
	e.createItems()
	gate := newKafkaGate()
	defer gate.release()
	cfgA := e.config(itemsView())
	cfgA.Kafka.saramaHook = gate.apply
	a := start(t, cfgA)
	a.waitReady(t)
	b := start(t, e.config(itemsView()))
	waitCond(t, "b in standby", func() bool {
		return isErr(b.d.Reconcile(context.Background(), "items"), ErrNotActive)
	})

	// a polls this update and sends it; the request stays in flight.
	gate.hold()
	e.exec(`UPDATE items SET name = 'stale', updated_at = clock_timestamp() WHERE id = 1`)
	gate.waitHeld(t)
	e.exec(`UPDATE items SET name = 'fresh', updated_at = clock_timestamp() WHERE id = 1`)

	e.killLockHolder() // a's session: a loses its lock, b takes over
	b.waitReady(t)
	waitFor(t, e, "b's start-up epoch", func(recs []rec) bool { return countEnds(recs, "items") == 2 })
	time.Sleep(3 * lockPing) // a's watchdog has seen the lock lost: a publishes nothing new
	gate.release()           // but its request in flight reaches the broker
	waitCond(t, "a back in standby", func() bool { return !a.d.Active() })
	time.Sleep(time.Second) // anything a still had lands by now

	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if err := b.d.Reconcile(ctx, "items"); err != nil {
		t.Fatal(err)
	}
	recs := readAll(t, e.brokers, e.topic)
	takeover := -1
	for i, r := range recs {
		if r.meta.Kind == record.KindEpochBegin && r.meta.Epoch == 2 {
			takeover = i
			break
		}
	}
	if takeover < 0 {
		t.Fatalf("no take-over epoch:\n%s", dump(recs))
	}
	for _, r := range recs[takeover:] {
		if r.meta.Kind != record.KindPosition && r.meta.Epoch < 2 {
			t.Errorf("a record of the old active after the new active's first record: %v\nlog:\n%s", r, dump(recs))
			break
		}
	}
	rows := rowsOf(recs, "items")
	if !strings.Contains(rows["items|1"], `"name":"fresh"`) {
		t.Errorf("row 1 in the log: %s, in the database: name fresh", rows["items|1"])
	}
	var sum record.EpochHash
	for k, v := range rows {
		sum.Add(record.RowHash([]byte(k), []byte(v)))
	}
	if end := lastEnd(t, recs, "items"); end.Epoch != 3 || end.Hash != sum.Sum() || end.Rows != int64(len(rows)) {
		t.Errorf("the last epoch-end %+v does not describe the log's rows (hash %s, %d rows):\n%s",
			end, record.FormatHash(sum.Sum()), len(rows), dump(recs))
	}
}
