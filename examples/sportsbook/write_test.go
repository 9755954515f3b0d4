package sportsbook

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/statecast/statecast/cacheclient"
)

// post sends a POST to the service's handler and returns the status and the body.
func post(h http.Handler, path, body string) (int, string) {
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, path, strings.NewReader(body)))
	return rec.Code, rec.Body.String()
}

// TestWriteWithoutDatabase: without Config.DB the write endpoints answer 501.
func TestWriteWithoutDatabase(t *testing.T) {
	s, err := New(Config{Client: cacheclient.Config{Addresses: []string{"127.0.0.1:1"}, Stream: "sportsbook", Service: "no-db"}}, logger())
	if err != nil {
		t.Fatal(err)
	}
	defer s.Client.Close()
	for _, path := range []string{"/selections/100012/price", "/markets/10012/suspend", "/markets/10012/resume"} {
		if code, body := post(s.Handler(), path, `{"price":"2.5"}`); code != http.StatusNotImplemented || !strings.Contains(body, "need a database") {
			t.Errorf("POST %s: %d %q, want 501", path, code, body)
		}
	}
	if _, err := New(Config{Client: cacheclient.Config{Addresses: []string{"127.0.0.1:1"}, Stream: "s", Service: "x"}, WriteWait: -1}, logger()); err == nil {
		t.Error("a negative WriteWait is accepted")
	}
}

// TestReadYourWrites runs the write endpoints against the real pipeline (PostgreSQL, the
// distributor capturing the WAL, Kafka, the player): each of 100 price changes in a row,
// and each suspend or resume of a market in the three-table join view, is answered from
// the cache with the value just written. With the distributor stopped, a write is still
// committed but its answer is a 504 that says why, after WriteWait.
func TestReadYourWrites(t *testing.T) {
	st := startStack(t)
	pool, err := pgxpool.New(context.Background(), st.dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	const wait = 3 * time.Second
	s, err := New(Config{Client: cacheclient.Config{Addresses: []string{st.addr}, Stream: "sportsbook", Service: "sportsbook-ryw"},
		DB: pool, WriteWait: wait}, logger())
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Client.Start(); err != nil {
		t.Fatal(err)
	}
	defer s.Client.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := s.Client.WaitReady(ctx); err != nil {
		t.Fatal(err)
	}
	h := s.Handler()

	var last cacheclient.LSN
	for i := range 100 {
		price := fmt.Sprintf("%.3f", 1.5+float64(i)*0.125)
		code, body := post(h, "/selections/100012/price", fmt.Sprintf(`{"price":%q}`, price))
		var a WriteAnswer[Selection]
		if code != http.StatusOK || json.Unmarshal([]byte(body), &a) != nil {
			t.Fatalf("POST %d: %d %s", i, code, body)
		}
		if a.Row.ID != 100012 || a.Row.MarketID != 10001 || a.Row.Price != price {
			t.Fatalf("POST %d wrote price %s, the cache answered %+v", i, price, a.Row)
		}
		pos, err := cacheclient.ParseLSN(a.SourcePosition)
		if err != nil || pos <= last {
			t.Fatalf("POST %d: source position %q (previous %v): %v", i, a.SourcePosition, last, err)
		}
		last = pos
	}
	for i := range 20 {
		suspended := i%2 == 0
		path := "/markets/10012/resume"
		if suspended {
			path = "/markets/10012/suspend"
		}
		code, body := post(h, path, "")
		var a WriteAnswer[Market]
		if code != http.StatusOK || json.Unmarshal([]byte(body), &a) != nil {
			t.Fatalf("POST %s: %d %s", path, code, body)
		}
		if a.Row.EventID != 1001 || a.Row.MarketID != 10012 || a.Row.Suspended != suspended {
			t.Fatalf("POST %s: the cache answered %+v", path, a.Row)
		}
	}
	if code, body := post(h, "/selections/999/price", `{"price":"2"}`); code != http.StatusNotFound {
		t.Errorf("unknown selection: %d %s", code, body)
	}
	for _, b := range []string{`{"price":"abc"}`, `{"price":"1000000"}`, `{}`} {
		if code, body := post(h, "/selections/100012/price", b); code != http.StatusBadRequest {
			t.Errorf("body %s: %d %s, want 400", b, code, body)
		}
	}

	// The distributor stops: the write commits, the cache cannot show it.
	st.stopDist()
	start := time.Now()
	code, body := post(h, "/selections/100012/price", `{"price":"9.875"}`)
	if code != http.StatusGatewayTimeout || !strings.Contains(body, "did not reach it within 3s") {
		t.Errorf("with the distributor stopped: %d %q, want 504", code, body)
	}
	if took := time.Since(start); took < wait || took > wait+2*time.Second {
		t.Errorf("the 504 came after %v, want WriteWait (%v)", took, wait)
	}
	var price string
	if err := st.db.QueryRow(ctx, "SELECT price::text FROM selections WHERE id = 100012").Scan(&price); err != nil || price != "9.875" {
		t.Errorf("the write is not committed: %q %v", price, err)
	}
	if x, _ := s.Selections.Get(cacheclient.Key("10001", "100012")); x.Price == "9.875" {
		t.Error("the cache shows a write the stopped distributor never published")
	}
}
