package e2e

import (
	"context"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/statecast/statecast/cacheclient"
	"github.com/statecast/statecast/cacheclient/cachestatus"
	"github.com/statecast/statecast/distributor"
	"github.com/statecast/statecast/internal/statuspage"
	"github.com/statecast/statecast/internal/testenv"
	"github.com/statecast/statecast/kafkaconn"
	"github.com/statecast/statecast/player"
)

// chromium returns the headless browser's path. Missing, the test skips, except under
// CI=true, where make test installs it (the tools target) and its absence is a failure.
func chromium(t *testing.T) string {
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	if os.Getenv("CI") == "true" {
		t.Fatal("chromium not found (make tools installs it)")
	}
	t.Skip("chromium not found (make tools installs it)")
	return ""
}

// artifactDir is where screenshots go: $STATECAST_ARTIFACTS, or the test's temp dir.
func artifactDir(t *testing.T) string {
	if d := os.Getenv("STATECAST_ARTIFACTS"); d != "" {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
		return d
	}
	return t.TempDir()
}

// TestStatusPagesInBrowser runs PostgreSQL → distributor → Kafka → player → cacheclient,
// opens the three status pages in headless Chromium and checks that they show the live
// values of the system (role, epoch, rows, positions, state), then saves a screenshot of
// each.
func TestStatusPagesInBrowser(t *testing.T) {
	exe := chromium(t)
	ctx := context.Background()
	const nRows = 37
	dsn := testenv.NewDatabase(t)
	pool, err := pgxpool.New(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	if _, err := pool.Exec(ctx, `CREATE TABLE accounts (id int PRIMARY KEY, balance bigint NOT NULL);
		INSERT INTO accounts SELECT i, 1000 FROM generate_series(1, `+strconv.Itoa(nRows)+`) i`); err != nil {
		t.Fatal(err)
	}
	e := newKafkaEnv(t)
	d, err := distributor.New(distributor.Config{
		Postgres: distributor.PostgresConfig{DSN: dsn},
		Kafka:    distributor.KafkaConfig{Config: kafkaconn.Config{Brokers: e.brokers, ClientID: "e2e"}},
		Streams: []distributor.StreamConfig{{Topic: e.topic, PositionInterval: 50 * time.Millisecond, Views: []distributor.ViewConfig{
			{Name: "accounts", SQL: "SELECT id, balance FROM accounts", Key: []string{"id"}},
		}}},
	})
	if err != nil {
		t.Fatal(err)
	}
	dctx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- d.Run(dctx) }()
	t.Cleanup(func() {
		stop()
		if err := <-done; err != nil {
			t.Errorf("distributor: %v", err)
		}
	})
	rctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	if err := d.WaitReady(rctx); err != nil {
		t.Fatal(err)
	}
	p, addr, _ := startPlayerP(t, e, func(c *player.Config) { c.Streams[0].Views = []string{"*"} })
	c, err := cacheclient.New(cacheclient.Config{Addresses: []string{addr}, Stream: "s", Service: "statuspage-test"})
	if err != nil {
		t.Fatal(err)
	}
	view, err := cacheclient.Register(c, "accounts", decodeAccount)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	if err := c.WaitReady(rctx); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the cache holds every row", func() bool { return view.Len() == nRows })

	dsrv := httptest.NewServer(d.AdminHandler())
	t.Cleanup(dsrv.Close)
	psrv := httptest.NewServer(p.AdminHandler())
	t.Cleanup(psrv.Close)
	mux := http.NewServeMux()
	mux.Handle("/cache/status", cachestatus.Handler(c))
	csrv := httptest.NewServer(mux)
	t.Cleanup(csrv.Close)

	// Updates for a few sampling intervals, so that the charts have something to draw;
	// then the system settles, and the pages must show its final state.
	wctx, wstop := context.WithTimeout(ctx, 2*statuspage.Interval+time.Second)
	for i := 0; wctx.Err() == nil; i++ {
		if _, err := pool.Exec(wctx, `UPDATE accounts SET balance = balance + 1 WHERE id = $1`, i%nRows+1); err != nil && wctx.Err() == nil {
			t.Fatal(err)
		}
		time.Sleep(20 * time.Millisecond)
	}
	wstop()
	eventually(t, "the cache caught up with the player", func() bool {
		return c.Stats().Position >= p.Status().Streams[0].Current && c.Stats().SourcePosition != 0
	})

	actx, acancel := chromedp.NewExecAllocator(ctx, append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(exe), chromedp.NoSandbox, chromedp.Headless, chromedp.DisableGPU,
		chromedp.WindowSize(1400, 900))...)
	defer acancel()
	bctx, bcancel := chromedp.NewContext(actx)
	defer bcancel()
	// The first action starts the browser, which lives as long as that call's context: no
	// timeout on it; each page gets one below.
	if err := chromedp.Do(bctx, chromedp.Navigate("about:blank")); err != nil {
		t.Fatalf("start chromium: %v", err)
	}
	dir := artifactDir(t)

	// load opens url, returns the text of each CSS selector and saves a screenshot.
	load := func(name, url string, sels ...string) map[string]string {
		t.Helper()
		pctx, cancel := context.WithTimeout(bctx, 30*time.Second)
		defer cancel()
		if err := chromedp.Do(pctx, chromedp.Navigate(url), chromedp.WaitVisible(chromedp.CSS("h1"))); err != nil {
			t.Fatalf("%s page: %v", name, err)
		}
		title, err := chromedp.Run(pctx, chromedp.Title())
		if err != nil || !strings.HasPrefix(title, "statecast") {
			t.Errorf("%s page: title %q, %v", name, title, err)
		}
		out := map[string]string{}
		for _, s := range sels {
			txt, err := chromedp.Run(pctx, chromedp.Text(chromedp.CSS(s)))
			if err != nil {
				t.Fatalf("%s page: %s: %v", name, s, err)
			}
			out[s] = strings.TrimSpace(txt)
		}
		// Every chart has its axes and its current value (or says it has no sample yet).
		bare, err := chromedp.Run(pctx, chromedp.Evaluate[int](`[...document.querySelectorAll("svg.chart")].filter(s =>
			!["y-min", "y-max", "x-start", "x-end", "now"].every(c => (s.querySelector("text." + c)?.textContent ?? "") !== "")).length`))
		if err != nil {
			t.Fatalf("%s page: charts: %v", name, err)
		}
		if bare != 0 {
			t.Errorf("%s page: %d charts lack an axis label or the current value", name, bare)
		}
		png, err := chromedp.Run(pctx, chromedp.FullScreenshot(100))
		if err != nil {
			t.Fatalf("%s page: screenshot: %v", name, err)
		}
		if len(png) < 1000 || string(png[1:4]) != "PNG" {
			t.Errorf("%s page: the screenshot is not a PNG (%d bytes)", name, len(png))
		}
		f := filepath.Join(dir, "status-"+name+".png")
		if err := os.WriteFile(f, png, 0o644); err != nil {
			t.Fatal(err)
		}
		t.Logf("%s status page: screenshot %s", name, f)
		return out
	}
	want := func(page, what, got, want string) {
		t.Helper()
		if got != want {
			t.Errorf("%s page shows %s %q, want %q", page, what, got, want)
		}
	}

	// The distributor: this process is active; the view's epoch and rows are the system's.
	ds := d.Status()
	got := load("distributor", dsrv.URL+"/status", ".role", "table.views td.epoch", "table.views td.rows", "#version")
	want("distributor", "role", got[".role"], "active")
	want("distributor", "epoch", got["table.views td.epoch"], strconv.FormatUint(ds[0].Views[0].Epoch, 10))
	want("distributor", "rows", got["table.views td.rows"], strconv.Itoa(nRows))
	if ds[0].Views[0].Epoch == 0 || got["#version"] == "" {
		t.Errorf("distributor: epoch %d, version %q", ds[0].Views[0].Epoch, got["#version"])
	}

	// The player: the stream is ready, its rows and position are the player's; one target
	// (the cache) in state N.
	ps := p.Status().Streams[0]
	pBefore := ps.Current
	got = load("player", psrv.URL+"/status", "dd .state", "dd.rows", "dd.position", "table.targets td:nth-child(1)", "table.targets td:nth-child(5)")
	want("player", "state", got["dd .state"], "ready")
	want("player", "rows", got["dd.rows"], strconv.Itoa(ps.Rows))
	want("player", "service", got["table.targets td:nth-child(1)"], "statuspage-test")
	want("player", "target state", got["table.targets td:nth-child(5)"], "N")
	if pos, _ := strconv.ParseInt(got["dd.position"], 10, 64); pos < pBefore || pos > p.Status().Streams[0].Current {
		t.Errorf("player page shows position %q, player at %d", got["dd.position"], p.Status().Streams[0].Current)
	}
	if ps.Rows != nRows {
		t.Errorf("player holds %d rows, want %d", ps.Rows, nRows)
	}

	// The cache: ready, the view's entries are the table's rows, the position is the client's.
	// Position records keep coming (position_interval): the position shown lies between
	// the client's before and after the page was loaded.
	before := c.Stats().Position
	got = load("cacheclient", csrv.URL+"/cache/status", "dd .state", "table.views td.rows", "dd.position")
	after := c.Stats().Position
	want("cacheclient", "state", got["dd .state"], "ready")
	want("cacheclient", "rows", got["table.views td.rows"], strconv.Itoa(nRows))
	if pos, _ := strconv.ParseInt(got["dd.position"], 10, 64); pos < before || pos > after || pos <= 0 {
		t.Errorf("cacheclient page shows position %q, the client was at %d then %d", got["dd.position"], before, after)
	}

	// The charts are inline SVG drawn from samples (the first taken when the handler was made).
	svgs, err := chromedp.Run(bctx, chromedp.Evaluate[int](`document.querySelectorAll("svg.spark").length`))
	if err != nil {
		t.Fatal(err)
	}
	if svgs < 3 {
		t.Errorf("the cache page draws %d sparklines", svgs)
	}
	// The entries/s chart has a line of several samples, and says the rate it shows now.
	pts, err := chromedp.Run(bctx, chromedp.Evaluate[string](`document.querySelectorAll("svg.spark")[2].querySelector("polyline").getAttribute("points")`))
	if err != nil {
		t.Fatal(err)
	}
	if n := len(strings.Fields(pts)); n < 2 {
		t.Errorf("the entries/s chart has %d points: %q", n, pts)
	}
	now, err := chromedp.Run(bctx, chromedp.Evaluate[string](`document.querySelectorAll("svg.spark")[2].querySelector("text.now").textContent`))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasSuffix(now, "/s") {
		t.Errorf("the entries/s chart says %q now, want a rate", now)
	}
}
