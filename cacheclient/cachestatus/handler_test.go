package cachestatus

import (
	"encoding/json"
	"net/http/httptest"
	"strings"
	"testing"

	"go.uber.org/goleak"

	"github.com/statecast/statecast/cacheclient"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// TestHandler: a browser gets the page with the client's identity and views, anything else
// Stats as JSON; the charts' sampler ends with the client (goleak).
func TestHandler(t *testing.T) {
	c, err := cacheclient.New(cacheclient.Config{Addresses: []string{"127.0.0.1:1"}, Stream: "s", Service: "pricing", InstanceID: "pricing-1"})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := cacheclient.Register(c, "events", func(string, []byte) (int, error) { return 0, nil }); err != nil {
		t.Fatal(err)
	}
	h := Handler(c)
	rec := httptest.NewRecorder()
	req := httptest.NewRequest("GET", "/cache/status", nil)
	req.Header.Set("Accept", "text/html,application/xhtml+xml,*/*;q=0.8")
	h.ServeHTTP(rec, req)
	body := rec.Body.String()
	if !strings.HasPrefix(rec.Header().Get("Content-Type"), "text/html") {
		t.Fatalf("browser: %s\n%s", rec.Header().Get("Content-Type"), body)
	}
	for _, want := range []string{"<title>statecast cache</title>", "stream s", "pricing / pricing-1", "<td>events</td>", `class="bad state">disconnected`} {
		if !strings.Contains(body, want) {
			t.Errorf("the page lacks %q:\n%s", want, body)
		}
	}
	for _, path := range []string{"/cache/status", "/cache/status.json"} {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest("GET", path, nil))
		var st cacheclient.Stats
		if err := json.Unmarshal(rec.Body.Bytes(), &st); err != nil || rec.Header().Get("Content-Type") != "application/json" ||
			len(st.Views) != 1 || st.Views[0].Name != "events" || st.Position != -1 {
			t.Errorf("%s: %v %+v\n%s", path, err, st, rec.Body.String())
		}
	}
	if info := c.Info(); info.Stream != "s" || info.Service != "pricing" || info.InstanceID != "pricing-1" || info.Created.IsZero() {
		t.Errorf("Info = %+v", info)
	}
}
