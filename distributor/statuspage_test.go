package distributor

import (
	"encoding/json"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/statecast/statecast/kafkaconn"
)

// TestStatusNegotiation: /status gives a browser the HTML page and anything else the JSON
// it always gave; /status.json is JSON whatever the Accept header.
func TestStatusNegotiation(t *testing.T) {
	d, err := New(Config{Postgres: PostgresConfig{DSN: "postgres://localhost/x"},
		Kafka: KafkaConfig{Config: kafkaconn.Config{Brokers: []string{"localhost:9092"}}},
		Streams: []StreamConfig{{Topic: "t", Capture: CapturePoll,
			Views: []ViewConfig{{Name: "v", SQL: "SELECT 1 AS id", Key: []string{"id"}}}}}})
	if err != nil {
		t.Fatal(err)
	}
	defer close(d.done) // ends the charts' sampler
	h := d.AdminHandler()
	get := func(path, accept string) *httptest.ResponseRecorder {
		r := httptest.NewRequest("GET", path, nil)
		if accept != "" {
			r.Header.Set("Accept", accept)
		}
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		return w
	}
	w := get("/status", "text/html,application/xhtml+xml,*/*;q=0.8")
	if ct := w.Header().Get("Content-Type"); !strings.HasPrefix(ct, "text/html") || !strings.Contains(w.Body.String(), "statecast distributor") {
		t.Fatalf("browser: %s %s", ct, w.Body.String())
	}
	for _, c := range []struct{ path, accept string }{{"/status", ""}, {"/status", "application/json"}, {"/status.json", "text/html"}} {
		w := get(c.path, c.accept)
		var v struct{ Streams []StreamStatus }
		if err := json.Unmarshal(w.Body.Bytes(), &v); err != nil || w.Header().Get("Content-Type") != "application/json" {
			t.Fatalf("%s (Accept %q): %v %s", c.path, c.accept, err, w.Body.String())
		}
	}
}
