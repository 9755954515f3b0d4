package chaos

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/encoding"
	"google.golang.org/grpc/mem"
	"google.golang.org/protobuf/proto"

	"github.com/statecast/statecast/cacheclient"
	"github.com/statecast/statecast/internal/checker"
	statecastv1 "github.com/statecast/statecast/schemas/gen/statecast/v1"
)

// ClientConfig is the configuration of a client process: a service embedding cacheclient
// with secondary indexes and a state directory, as the run starts it (`chaos client`).
type ClientConfig struct {
	ID       string   `json:"id"`      // cacheclient's InstanceID, the delivery checker's target
	Stream   string   `json:"stream"`  // the stream (topic)
	Players  []string `json:"players"` // the players' addresses (the run's proxies)
	Views    []string `json:"views"`
	StateDir string   `json:"state_dir"` // empty: no persistence (a snapshot at each start)
	Control  string   `json:"control"`   // the control HTTP address (state, wait, dump)
	Events   string   `json:"events"`    // the file that receives what the client received
}

// row is what the client's views hold: the row's canonical text (see canonical) and the
// value of its indexed column.
type row struct {
	canon string
	index string
	num   int64 // the view's SumColumn
}

// RunClient runs a client process until ctx ends. Everything it receives from a player is
// appended to cfg.Events before the client handles it (see recorder), so that the delivery
// checker can replay it after the run, across kills of the process.
func RunClient(ctx context.Context, cfg ClientConfig, log *slog.Logger) error {
	rec, err := openRecorder(cfg.Events)
	if err != nil {
		return err
	}
	defer rec.close()
	c, err := cacheclient.New(cacheclient.Config{
		Addresses: cfg.Players, Stream: cfg.Stream, Service: "chaos", InstanceID: cfg.ID, StateDir: cfg.StateDir,
		PersistInterval: 2 * time.Second, BackoffMin: 50 * time.Millisecond, BackoffMax: time.Second,
	}, cacheclient.WithLogger(log), cacheclient.WithDialOptions(grpc.WithStreamInterceptor(rec.intercept)))
	if err != nil {
		return err
	}
	vs := map[string]*cacheclient.View[row]{}
	for _, name := range cfg.Views {
		def := viewByName(name)
		if def == nil {
			return fmt.Errorf("unknown view %q", name)
		}
		v, err := cacheclient.Register(c, name, func(_ string, value []byte) (row, error) {
			s, err := canonical(value)
			if err != nil {
				return row{}, err
			}
			r := row{canon: s}
			if def.IndexColumn != "" {
				r.index = column(value, def.IndexColumn)
			}
			if def.SumColumn != "" {
				r.num = intColumn(value, def.SumColumn)
			}
			return r, nil
		})
		if err != nil {
			return err
		}
		if def.Index != "" {
			if err := v.AddIndex(def.Index, func(r row) []string { return []string{r.index} }); err != nil {
				return err
			}
		}
		vs[name] = v
	}
	lis, err := net.Listen("tcp", cfg.Control)
	if err != nil {
		return err
	}
	if err := c.Start(); err != nil {
		lis.Close()
		return err
	}
	srv := &http.Server{Handler: controlHandler(c, vs), ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = srv.Serve(lis) }()
	<-ctx.Done()
	sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_ = srv.Shutdown(sctx)
	return c.Close()
}

// ClientState is what GET /state answers.
type ClientState struct {
	Position int64             `json:"position"`
	Source   string            `json:"source"`
	Stats    cacheclient.Stats `json:"stats"`
}

// WaitResult is what GET /wait answers: after WaitFor(lsn), the rows asked for from one Cut
// (absent rows are missing from Rows).
type WaitResult struct {
	Err      string            `json:"err,omitempty"`
	Position int64             `json:"position"`
	Source   string            `json:"source"`
	Rows     map[string]string `json:"rows"` // "view key" → canonical row
}

// Dump is what GET /dump answers: every view's rows from one Cut, and what the client
// found wrong with its own indexes.
type Dump struct {
	Position    int64                        `json:"position"`
	Source      string                       `json:"source"`
	Views       map[string]map[string]string `json:"views"` // view → key → canonical row
	IndexErrors []string                     `json:"index_errors"`
}

// Sums is what GET /sums answers.
type Sums struct {
	Ready    bool    `json:"ready"`
	Position int64   `json:"position"`
	Sums     []int64 `json:"sums"`
}

func controlHandler(c *cacheclient.Client, vs map[string]*cacheclient.View[row]) http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /state", func(w http.ResponseWriter, r *http.Request) {
		cut := c.Read()
		writeJSON(w, ClientState{Position: cut.Position(), Source: cut.SourcePosition().String(), Stats: c.Stats()})
	})
	// /wait?lsn=X&timeout=D&row=view+key&row=…
	mux.HandleFunc("GET /wait", func(w http.ResponseWriter, r *http.Request) {
		var res WaitResult
		lsn, err := cacheclient.ParseLSN(r.FormValue("lsn"))
		d, derr := time.ParseDuration(r.FormValue("timeout"))
		if err != nil || derr != nil {
			http.Error(w, "bad lsn or timeout", http.StatusBadRequest)
			return
		}
		ctx, cancel := context.WithTimeout(r.Context(), d)
		defer cancel()
		if err := c.WaitFor(ctx, lsn); err != nil {
			res.Err = err.Error()
			writeJSON(w, res)
			return
		}
		cut := c.Read()
		res.Position, res.Source, res.Rows = cut.Position(), cut.SourcePosition().String(), map[string]string{}
		for _, vk := range r.Form["row"] {
			view, key, _ := strings.Cut(vk, " ")
			if v := vs[view]; v != nil {
				if got, ok := v.In(cut).Get(key); ok {
					res.Rows[vk] = got.canon
				}
			}
		}
		writeJSON(w, res)
	})
	// /sums?view=V&mod=W: the sum of the view's SumColumn over the rows of each writer
	// partition (key mod W), from one Cut.
	mux.HandleFunc("GET /sums", func(w http.ResponseWriter, r *http.Request) {
		v := vs[r.FormValue("view")]
		mod, err := strconv.Atoi(r.FormValue("mod"))
		if v == nil || err != nil || mod <= 0 {
			http.Error(w, "bad view or mod", http.StatusBadRequest)
			return
		}
		cut := c.Read()
		res := Sums{Ready: c.Ready(), Position: cut.Position(), Sums: make([]int64, mod)}
		v.In(cut).Range(func(key string, r row) bool {
			id, _ := strconv.Atoi(key)
			res.Sums[id%mod] += r.num
			return true
		})
		writeJSON(w, res)
	})
	mux.HandleFunc("GET /dump", func(w http.ResponseWriter, r *http.Request) {
		cut := c.Read()
		d := Dump{Position: cut.Position(), Source: cut.SourcePosition().String(), Views: map[string]map[string]string{}}
		for name, v := range vs {
			ver := v.In(cut)
			rows := map[string]string{}
			byIndex := map[string][]string{}
			ver.Range(func(key string, r row) bool {
				rows[key] = r.canon
				byIndex[r.index] = append(byIndex[r.index], key)
				return true
			})
			d.Views[name] = rows
			if def := viewByName(name); def.Index != "" {
				d.IndexErrors = append(d.IndexErrors, checkIndex(name, def.Index, ver, byIndex)...)
			}
		}
		writeJSON(w, d)
	})
	return mux
}

// checkIndex compares a view's index with the keys its rows say it should hold.
func checkIndex(view, index string, ver *cacheclient.Version[row], want map[string][]string) []string {
	var out []string
	vals := ver.IndexValues(index)
	for _, val := range vals {
		if _, ok := want[val]; !ok {
			out = append(out, fmt.Sprintf("view %s index %s: value %q indexed, no row has it (keys %v)", view, index, val, ver.ByIndexKeys(index, val)))
		}
	}
	for val, keys := range want {
		got := slices.Clone(ver.ByIndexKeys(index, val))
		slices.Sort(got)
		slices.Sort(keys)
		if !slices.Equal(got, keys) {
			out = append(out, fmt.Sprintf("view %s index %s value %q: keys %v, rows say %v", view, index, val, got, keys))
		}
	}
	return out
}

func writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(v)
}

// event is one line of a client's events file: what it sent (Hello) or received.
type event struct {
	T       string          `json:"t"` // h: Hello, b: batch, p: progress, sb/se: snapshot begin/end, rs: resync
	Views   []string        `json:"v,omitempty"`
	Resume  *int64          `json:"r,omitempty"`
	Index   int64           `json:"i,omitempty"`
	Entries []checker.Entry `json:"e,omitempty"`
	Detail  string          `json:"d,omitempty"`
}

// recorder appends a client's events to its file, one write per line: a line written is
// kept when the process is killed right after (it is in the kernel), and the line of a
// frame is written before the client sees the frame, so the file never lacks what the
// client applied. What it received but did not apply (killed first) is undone for the
// checker by the next Hello, whose resume index says what the client holds.
type recorder struct {
	mu sync.Mutex
	f  *os.File
}

func openRecorder(path string) (*recorder, error) {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, err
	}
	return &recorder{f: f}, nil
}

func (r *recorder) close() { _ = r.f.Close() }

func (r *recorder) write(ev event) {
	b, err := json.Marshal(ev)
	if err != nil {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	_, _ = r.f.Write(append(b, '\n'))
}

// intercept is a stream interceptor for the client's Subscribe calls: it records the Hello
// it sends, and wraps the codec that cacheclient forces on the call so that each response
// is decoded once more, into the generated type, and recorded before cacheclient's own
// decoder hands it to the client.
func (r *recorder) intercept(ctx context.Context, desc *grpc.StreamDesc, cc *grpc.ClientConn, method string,
	streamer grpc.Streamer, opts ...grpc.CallOption) (grpc.ClientStream, error) {
	opts = slices.Clone(opts)
	for i, o := range opts {
		if fc, ok := o.(grpc.ForceCodecV2CallOption); ok {
			opts[i] = grpc.ForceCodecV2CallOption{CodecV2: recCodec{inner: fc.CodecV2, rec: r}}
		}
	}
	cs, err := streamer(ctx, desc, cc, method, opts...)
	if err != nil {
		return nil, err
	}
	return recStream{ClientStream: cs, rec: r}, nil
}

type recStream struct {
	grpc.ClientStream
	rec *recorder
}

func (s recStream) SendMsg(m any) error {
	if req, ok := m.(*statecastv1.SubscribeRequest); ok {
		if h := req.GetHello(); h != nil {
			ev := event{T: "h", Views: h.GetViews()}
			if h.ResumeIndex != nil {
				i := h.GetResumeIndex()
				ev.Resume = &i
			}
			s.rec.write(ev)
		}
	}
	return s.ClientStream.SendMsg(m)
}

type recCodec struct {
	inner encoding.CodecV2
	rec   *recorder
}

func (c recCodec) Marshal(v any) (mem.BufferSlice, error) { return c.inner.Marshal(v) }
func (c recCodec) Name() string                           { return c.inner.Name() }

func (c recCodec) Unmarshal(data mem.BufferSlice, v any) error {
	var resp statecastv1.SubscribeResponse
	if err := proto.Unmarshal(data.Materialize(), &resp); err == nil {
		c.rec.response(&resp)
	}
	return c.inner.Unmarshal(data, v)
}

func (r *recorder) response(resp *statecastv1.SubscribeResponse) {
	switch m := resp.GetMsg().(type) {
	case *statecastv1.SubscribeResponse_Batch:
		es := m.Batch.GetEntries()
		ev := event{T: "b", Entries: make([]checker.Entry, len(es))}
		for i, e := range es {
			ev.Entries[i] = checker.EntryOf(e)
		}
		r.write(ev)
	case *statecastv1.SubscribeResponse_Progress:
		r.write(event{T: "p", Index: m.Progress.GetIndex()})
	case *statecastv1.SubscribeResponse_SnapshotBegin:
		r.write(event{T: "sb", Index: m.SnapshotBegin.GetIndex(), Views: m.SnapshotBegin.GetViews()})
	case *statecastv1.SubscribeResponse_SnapshotEnd:
		r.write(event{T: "se", Index: m.SnapshotEnd.GetIndex()})
	case *statecastv1.SubscribeResponse_ResyncRequired:
		r.write(event{T: "rs", Detail: m.ResyncRequired.GetReason().String() + ": " + m.ResyncRequired.GetDetail()})
	}
}

// replayEvents feeds a client's events file to the checker as target id. A last line cut
// by a kill is ignored.
func replayEvents(chk *checker.Checker, id, path string) error {
	b, err := os.ReadFile(path)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return nil
		}
		return err
	}
	for _, line := range strings.Split(string(b), "\n") {
		if line == "" {
			continue
		}
		var ev event
		if json.Unmarshal([]byte(line), &ev) != nil {
			continue
		}
		switch ev.T {
		case "h":
			chk.Hello(id, ev.Views, ev.Resume)
		case "b":
			chk.Batch(id, ev.Entries)
		case "p":
			chk.Progress(id, ev.Index)
		case "sb":
			chk.SnapshotBegin(id, ev.Index, ev.Views)
		case "se":
			chk.SnapshotEnd(id, ev.Index)
		case "rs":
			chk.Resync(id, ev.Detail)
		}
	}
	return nil
}
