package devenv

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"runtime/pprof"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/statecast/statecast/examples/sportsbook"
	"github.com/statecast/statecast/examples/sportsbook/demo"
	"github.com/statecast/statecast/internal/testenv"
)

// demoDatabase returns a unique name for a test's demo database, dropped (with its
// replication slots) when the test ends.
func demoDatabase(t *testing.T) (admin, name string) {
	admin = testenv.PostgresDSN(t)
	name = testenv.UniqueName("demo")
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if c, err := pgx.Connect(ctx, admin); err == nil {
			_ = demo.DropSlots(ctx, c, name)
			_, _ = c.Exec(ctx, "DROP DATABASE IF EXISTS "+name+" WITH (FORCE)")
			_ = c.Close(ctx)
		}
	})
	return admin, name
}

// TestDevDemo runs the whole demo (real PostgreSQL, embedded broker, distributor capturing
// the WAL, player, sportsbook service) and checks both sides: the stream shows the
// snapshot, the scripted changes as source transactions and the delete's tombstones
// without any reconcile epoch; the read-your-writes requests answer with their writes;
// the live service answers over HTTP with the changed values, 404s the deleted event, and
// the demo's convergence check passed.
func TestDevDemo(t *testing.T) {
	admin, name := demoDatabase(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var out bytes.Buffer
	served := false
	status := "http://" + testenv.FreeAddr(t)
	err := Dev(ctx, DevOptions{AdminDSN: admin, Database: name, Out: &out, Duration: 10 * time.Millisecond, Step: 100 * time.Millisecond,
		StatusAddr: strings.TrimPrefix(status, "http://"),
		OnServing: func(ctx context.Context, url string) {
			served = true
			checkService(ctx, t, url)
			checkStatusPages(ctx, t, status)
		}})
	if err != nil {
		if errors.Is(err, ErrStuck) {
			var stacks bytes.Buffer
			_ = pprof.Lookup("goroutine").WriteTo(&stacks, 2)
			t.Logf("goroutines of the stuck component:\n%s", stacks.String())
		}
		t.Fatalf("Dev: %v\n%s", err, out.String())
	}
	if !served {
		t.Error("OnServing was not called")
	}
	s := out.String()
	for _, want := range []string{
		// snapshot epochs of every view
		`!ctl|sports|end  {"epoch":1,"rows":3,`,
		`!ctl|events|end  {"epoch":1,"rows":20,`,
		`!ctl|event_markets|end  {"epoch":1,"rows":60,`,
		`!ctl|selections|end  {"epoch":1,"rows":140,`,
		// how the distributor maps the join views' tables
		"events         competitions: by column(s) competition_id = competitions.id",
		"event_markets  competitions: by column(s) competition_id = competitions.id",
		": ends a source transaction of ",
		// the changes, as source transactions
		`txn selections|10001|100011  {"market_id":10001,"id":100011,"name":"Home","price":"2.150"}`,
		`"competition":"Premier League 26/27"`,
		`txn events|1100  {"id":1100,`,
		"after the commit (WaitFor source position ",
		// the delete, from the WAL, in every view it touches
		`txn events|1004  <tombstone>`,
		`txn event_markets|1004|10041  <tombstone>`,
		`txn selections|10041|100411  <tombstone>`,
		"the delete came from the WAL: its tombstones are the source transaction of its commit; no reconcile epoch ran",
		// read-your-writes through the service's HTTP
		`/selections/100012/price -d '{"price": "3.750"}'`,
		`"row":{"market_id":10001,"id":100012,"name":"Draw","price":"3.750"}}`,
		`"row":{"event_id":1003,"market_id":10031,"competition":"Roland-Garros","market":"Match Odds","suspended":true}}`,
		// the cache side: ready with the snapshot, the OnChange log, the HTTP answers
		"ready at index ",
		"sports 3, events 20, event_markets 60, selections 140",
		// where the status pages are
		"-- status pages on " + status + " — open them in a browser (curl gets their JSON):\n" +
			"   distributor  " + status + "/distributor/status\n" +
			"   player       " + status + "/player/status\n" +
			"   cache        " + status + "/cache/status\n",
		`msg="event changed" id=1003 name="Nadal v Djokovic" status=scheduled→live`,
		`msg="event added" id=1100 name="Lyon v Lille"`,
		`msg="event removed" id=1004`,
		"Home 2.150 | Draw",
		"market 10012 Over/Under 2.5       SUSPENDED Yes 3.200 | No 1.700",
		`competition="Premier League 26/27"`,
		"/events/1004   → 404",
		// convergence and shutdown
		"   events          20 rows  OK\n",
		"   event_markets   58 rows  OK\n",
		"   selections     136 rows  OK\n",
		"-- convergence: OK",
		"-- stopping (served for 10ms): every component in reverse order\n-- status pages stopped\n-- sportsbook service stopped\n-- player stopped\n-- stream printer stopped\n-- distributor stopped\n" +
			"-- replication slot " + demo.SlotName(name) + " dropped (a slot left behind keeps PostgreSQL from recycling WAL)\n" +
			"-- embedded Kafka stopped\n-- done\n",
	} {
		if !strings.Contains(s, want) {
			t.Errorf("output lacks %q", want)
		}
	}
	// No failed check, no reconcile epoch, no idle position record printed.
	for _, bad := range []string{"NOT in the sportsbook cache", "does NOT show", "DIFFERS", `"mode":"reconcile"`, ": idle"} {
		if strings.Contains(s, bad) {
			t.Errorf("output holds %q", bad)
		}
	}
	if t.Failed() {
		t.Log(s)
	}
}

// checkService queries the running sportsbook service over HTTP after the script.
func checkService(ctx context.Context, t *testing.T, url string) {
	t.Helper()
	get := func(path string, v any) int {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url+path, nil)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatalf("GET %s: %v", path, err)
		}
		defer resp.Body.Close()
		if resp.StatusCode == http.StatusOK && v != nil {
			if err := json.NewDecoder(resp.Body).Decode(v); err != nil {
				t.Errorf("GET %s: %v", path, err)
			}
		}
		return resp.StatusCode
	}
	var d sportsbook.EventDetail
	if code := get("/events/1000", &d); code != http.StatusOK || len(d.Markets) != 3 ||
		d.Markets[0].Competition != "Premier League 26/27" || len(d.Markets[0].Selections) != 3 ||
		d.Markets[0].Selections[0].Price != "2.150" {
		t.Errorf("/events/1000: %d %+v", code, d)
	}
	if d.Markets[0].Selections[1].Price != "3.750" {
		t.Errorf("/events/1000: the Draw's price written through the service: %+v", d.Markets[0].Selections[1])
	}
	d = sportsbook.EventDetail{}
	if code := get("/events/1003", &d); code != http.StatusOK || len(d.Markets) != 3 || !d.Markets[0].Suspended {
		t.Errorf("/events/1003 (Match Odds suspended through the service): %d %+v", code, d)
	}
	d = sportsbook.EventDetail{}
	if code := get("/events/1001", &d); code != http.StatusOK || len(d.Markets) != 3 || !d.Markets[1].Suspended || d.Markets[0].Suspended {
		t.Errorf("/events/1001: %d %+v", code, d)
	}
	var live []sportsbook.Event
	if code := get("/status/live/events", &live); code != http.StatusOK || len(live) != 1 || live[0].ID != 1003 {
		t.Errorf("/status/live/events: %d %+v", code, live)
	}
	d = sportsbook.EventDetail{}
	if code := get("/events/1100", &d); code != http.StatusOK || d.Name != "Lyon v Lille" || len(d.Markets) != 1 || len(d.Markets[0].Selections) != 3 {
		t.Errorf("/events/1100: %d %+v", code, d)
	}
	if code := get("/events/1004", nil); code != http.StatusNotFound {
		t.Errorf("/events/1004 (deleted): %d, want 404", code)
	}
	var comp []sportsbook.Event
	if code := get("/competitions/30/events", &comp); code != http.StatusOK ||
		slices.ContainsFunc(comp, func(e sportsbook.Event) bool { return e.ID == 1004 }) || len(comp) != 3 {
		t.Errorf("/competitions/30/events: %d %+v", code, comp)
	}
	// EuroLeague is the only Basketball competition: same events by sport.
	var bySport []sportsbook.Event
	if code := get("/sports/3/events", &bySport); code != http.StatusOK || len(bySport) != 3 ||
		slices.ContainsFunc(bySport, func(e sportsbook.Event) bool { return e.SportID != 3 || e.CompetitionID != 30 }) {
		t.Errorf("/sports/3/events: %d %+v", code, bySport)
	}
}

// checkStatusPages fetches the three status pages the demo printed: each is the HTML page
// with its charts for a browser and its JSON for anything else, showing the demo's stream.
func checkStatusPages(ctx context.Context, t *testing.T, base string) {
	t.Helper()
	get := func(path, accept string) (string, string) {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, base+path, nil)
		if accept != "" {
			req.Header.Set("Accept", accept)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatalf("GET %s: %v", path, err)
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != http.StatusOK {
			t.Errorf("GET %s: %s %s", path, resp.Status, body)
		}
		return resp.Header.Get("Content-Type"), string(body)
	}
	for _, p := range []struct{ path, title, stream string }{
		{"/distributor/status", "statecast distributor", `"topic": "sportsbook"`},
		{"/player/status", "statecast player", `"name": "sportsbook"`},
		{"/cache/status", "statecast cache", `"Ready": true`},
	} {
		ct, html := get(p.path, "text/html,application/xhtml+xml,*/*;q=0.8")
		if !strings.HasPrefix(ct, "text/html") || !strings.Contains(html, "<title>"+p.title+"</title>") || !strings.Contains(html, `<svg class="spark chart"`) ||
			!strings.Contains(html, `class="x-end"`) {
			t.Errorf("%s in a browser: %s, want the %s page with its charts:\n%s", p.path, ct, p.title, html)
		}
		if ct, js := get(p.path, ""); ct != "application/json" || !strings.Contains(js, p.stream) {
			t.Errorf("%s with curl: %s, want JSON holding %s:\n%s", p.path, ct, p.stream, js)
		}
	}
}

// TestDevReportsDivergence checks the convergence check itself: with the distributor
// stopped, a row deleted just before the check stays in the cache, and the demo says what
// differs and fails with ErrCheckFailed.
func TestDevReportsDivergence(t *testing.T) {
	admin, name := demoDatabase(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var out bytes.Buffer
	err := Dev(ctx, DevOptions{AdminDSN: admin, Database: name, Out: &out, Duration: time.Millisecond, Step: 50 * time.Millisecond,
		CheckTimeout: 2 * time.Second,
		beforeConverge: func(ctx context.Context, conn *pgx.Conn, stopDistributor func()) error {
			stopDistributor() // nothing publishes the delete
			_, err := conn.Exec(ctx, `DELETE FROM selections WHERE id = 100012`)
			return err
		}})
	if !errors.Is(err, ErrCheckFailed) {
		t.Fatalf("Dev: %v, want ErrCheckFailed\n%s", err, out.String())
	}
	s := out.String()
	for _, want := range []string{
		"   selections     135 rows  DIFFERS: key 10001|100012 in the cache, not in SQL; index market[10001]: cache [10001|100011 10001|100012 10001|100013], SQL [10001|100011 10001|100013]\n",
		"   events          20 rows  OK\n",
		"-- convergence: DIFFERS after 2s",
		"-- embedded Kafka stopped\n",
	} {
		if !strings.Contains(s, want) {
			t.Errorf("output lacks %q", want)
		}
	}
	if strings.Contains(s, "-- done") {
		t.Error("a failed demo says done")
	}
	if t.Failed() {
		t.Log(s)
	}
}
