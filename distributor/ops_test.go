package distributor

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

// TestListenWakesPoll: with an hour-long poll interval, a NOTIFY on the view's channel makes
// the change appear at once.
func TestListenWakesPoll(t *testing.T) {
	e := newEnv(t)
	e.createItems()
	v := itemsView()
	v.PollInterval = time.Hour
	v.Listen = "items_changed"
	r := start(t, e.config(v))
	r.waitReady(t)
	// the LISTEN connection may start after the ready signal: notify until it is heard
	e.exec(`INSERT INTO items (id, name) VALUES (30, 'notified')`)
	deadline := time.Now().Add(30 * time.Second)
	for {
		e.exec(`NOTIFY items_changed`)
		if rowsOf(readAll(t, e.brokers, e.topic), "items")["items|30"] != "" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("NOTIFY did not wake the poll")
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// TestCronRewrite: a cron schedule runs refresh epochs; mode rewrite republishes every row.
func TestCronRewrite(t *testing.T) {
	e := newEnv(t)
	e.createItems()
	v := ViewConfig{Name: "items", SQL: itemsSQL, Key: []string{"id"}, RefreshCron: "@every 1s", RefreshMode: ModeRewrite}
	r := start(t, e.config(v))
	r.waitReady(t)
	recs := waitFor(t, e, "a cron epoch", func(recs []rec) bool { return countEnds(recs, "items") >= 2 })
	end := lastEnd(t, recs, "items")
	if end.Published != 3 || end.Rows != 3 || end.Tombstones != 0 {
		t.Errorf("rewrite epoch-end %+v, want every row republished", end)
	}
	for _, rc := range recs {
		if rc.meta.Kind == "poll" {
			t.Errorf("poll record for a view without incremental column: %v", rc)
		}
	}
}

// TestHTTP: /healthz, /metrics and POST /reconcile.
func TestHTTP(t *testing.T) {
	e := newEnv(t)
	e.createItems()
	r := start(t, e.config(itemsView()))
	r.waitReady(t)
	srv := httptest.NewServer(r.d.Handler())
	defer srv.Close()
	get := func(method, path string, want int) string {
		t.Helper()
		req, _ := http.NewRequest(method, srv.URL+path, nil)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != want {
			t.Fatalf("%s %s = %d %s, want %d", method, path, resp.StatusCode, b, want)
		}
		return string(b)
	}
	if b := get("GET", "/healthz", 200); !strings.Contains(b, `"`+e.topic+`":"active"`) {
		t.Errorf("healthz: %s", b)
	}
	get("POST", "/reconcile?view=items", 200)
	get("POST", "/reconcile?view=nope", 404)
	m := get("GET", "/metrics", 200)
	for _, want := range []string{
		`statecast_distributor_rows_published_total{stream="` + e.topic + `",view="items"} 3`,
		`statecast_distributor_last_epoch{stream="` + e.topic + `",view="items"} 2`,
		`statecast_distributor_active{stream="` + e.topic + `"} 1`,
	} {
		if !strings.Contains(m, want) {
			t.Errorf("metrics lack %q:\n%s", want, m)
		}
	}
}
