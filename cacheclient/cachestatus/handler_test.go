package cachestatus

import (
	"context"
	"encoding/json"
	"errors"
	"net"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/statecast/statecast/cacheclient"
	statecastv1 "github.com/statecast/statecast/schemas/gen/statecast/v1"
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

// refusingPlayer refuses every subscription as a player refuses an unknown view.
type refusingPlayer struct {
	statecastv1.UnimplementedPlayerServer
}

func (refusingPlayer) Subscribe(grpc.BidiStreamingServer[statecastv1.SubscribeRequest, statecastv1.SubscribeResponse]) error {
	return status.Error(codes.NotFound, `player: unknown view: "evnts" is not a view of stream "s"`)
}

// TestHandlerStopped: a client stopped by a refusal that cannot heal shows as stopped,
// with the player's reason.
func TestHandlerStopped(t *testing.T) {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer()
	statecastv1.RegisterPlayerServer(srv, refusingPlayer{})
	go srv.Serve(lis)
	defer srv.Stop()
	c, err := cacheclient.New(cacheclient.Config{Addresses: []string{lis.Addr().String()}, Stream: "s", Service: "pricing"})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := cacheclient.Register(c, "evnts", func(string, []byte) (int, error) { return 0, nil }); err != nil {
		t.Fatal(err)
	}
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := c.WaitReady(ctx); !errors.Is(err, cacheclient.ErrUnknownView) {
		t.Fatalf("WaitReady = %v", err)
	}
	rec := httptest.NewRecorder()
	req := httptest.NewRequest("GET", "/cache/status", nil)
	req.Header.Set("Accept", "text/html")
	Handler(c).ServeHTTP(rec, req)
	body := rec.Body.String()
	for _, want := range []string{`class="bad state">stopped`, "is not a view of stream"} {
		if !strings.Contains(body, want) {
			t.Errorf("the page lacks %q:\n%s", want, body)
		}
	}
}
