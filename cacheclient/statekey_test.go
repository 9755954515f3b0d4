package cacheclient

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	statecastv1 "github.com/statecast/statecast/schemas/gen/statecast/v1"
)

var (
	testKey  = bytes.Repeat([]byte("k"), 32)
	otherKey = bytes.Repeat([]byte("o"), 32)
)

// forgedStateFile is what anyone who can write the state directory can make without the
// key: a well-formed file of checksum format, at index 5, whose row 1 is forged.
func forgedStateFile(t *testing.T) []byte {
	t.Helper()
	var buf bytes.Buffer
	if _, err := writeState(&buf, "s", nil, stateHead{index: 5}, []viewCapture{
		captureOf("events", map[string]string{"1": evJSON(1, "forged")}),
	}); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// resyncs records the OnResync reasons of a client.
type resyncs struct {
	mu      sync.Mutex
	reasons []string
}

func (r *resyncs) hooks() Hooks {
	return Hooks{OnResync: func(reason string) { r.mu.Lock(); r.reasons = append(r.reasons, reason); r.mu.Unlock() }}
}

func (r *resyncs) String() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return strings.Join(r.reasons, "; ")
}

// startKeyedClient is startClient with Config.StateKey and the OnResync hook recorded.
func startKeyedClient(t *testing.T, dir string, key []byte, fp *fakePlayer) (*Client, *View[event], *resyncs) {
	t.Helper()
	r := &resyncs{}
	c, err := New(Config{Addresses: []string{fp.addr}, Stream: "s", Service: "t", StateDir: dir, StateKey: key}, WithHooks(r.hooks()))
	if err != nil {
		t.Fatal(err)
	}
	v, err := Register(c, "events", decodeEvent)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c, v, r
}

// TestStateKeyRefusesForgedFile: with Config.StateKey, a file the key did not
// authenticate — a forged one of checksum format — is refused (OnResync says so) and the
// client bootstraps from a snapshot: the forged row is never shown. Without the key such a
// file loads: that is what the checksum alone cannot prevent.
func TestStateKeyRefusesForgedFile(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, StateFileName), forgedStateFile(t), 0o644); err != nil {
		t.Fatal(err)
	}
	fp := startFake(t, func(conn int, h *statecastv1.Hello, s *fakeStream) error {
		if h.ResumeIndex != nil {
			return errors.New("resumed from a forged file")
		}
		return s.snapshot(7, ent(3, "1", evJSON(1, "real")))
	})
	c, v, r := startKeyedClient(t, dir, testKey, fp)
	waitReady(t, c)
	if e, ok := v.Get("1"); !ok || e.Sport != "real" {
		t.Fatalf("row 1: %+v %v, want the snapshot's", e, ok)
	}
	if !strings.Contains(r.String(), "state file not authenticated") {
		t.Errorf("OnResync: %q, want the refusal named", r)
	}
}

// TestStateKeyRoundTrip: a file written with the key resumes a client with the same key;
// a client with another key, or with none, refuses it and bootstraps; a client with the
// key refuses the file once a byte of it changed.
func TestStateKeyRoundTrip(t *testing.T) {
	dir := t.TempDir()
	var resumed []int64
	var mu sync.Mutex
	fp := startFake(t, func(conn int, h *statecastv1.Hello, s *fakeStream) error {
		mu.Lock()
		if h.ResumeIndex != nil {
			resumed = append(resumed, h.GetResumeIndex())
		} else {
			resumed = append(resumed, -1)
		}
		mu.Unlock()
		if h.ResumeIndex != nil {
			return s.batch(ent(h.GetResumeIndex()+1, "2", evJSON(2, "b")))
		}
		return s.snapshot(5, ent(1, "1", evJSON(1, "a")))
	})
	run := func(key []byte) (*View[event], *resyncs) {
		c, v, r := startKeyedClient(t, dir, key, fp)
		waitReady(t, c)
		eventually(t, "row 2 or the snapshot", func() bool { return v.Len() >= 1 })
		if err := c.Close(); err != nil {
			t.Fatal(err)
		}
		return v, r
	}
	run(testKey)
	b, err := os.ReadFile(filepath.Join(dir, StateFileName))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.HasPrefix(b, []byte(stateMagicMAC)) {
		t.Fatalf("file written with a key begins %q", b[:8])
	}
	if _, _, err := readState(b, "s", testKey, &memSink{}); err != nil {
		t.Fatalf("the keyed file: %v", err)
	}
	for _, tc := range []struct {
		name   string
		key    []byte
		edit   func([]byte) []byte
		resume bool
	}{
		{"same key", testKey, nil, true},
		{"other key", otherKey, nil, false},
		{"no key", nil, nil, false},
		{"a byte changed", testKey, func(b []byte) []byte { b[len(b)-40] ^= 1; return b }, false},
	} {
		b, err := os.ReadFile(filepath.Join(dir, StateFileName))
		if err != nil {
			t.Fatal(err)
		}
		if tc.edit != nil {
			if err := os.WriteFile(filepath.Join(dir, StateFileName), tc.edit(b), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		mu.Lock()
		resumed = resumed[:0]
		mu.Unlock()
		_, r := run(tc.key)
		mu.Lock()
		got := len(resumed) > 0 && resumed[0] >= 0
		mu.Unlock()
		if got != tc.resume {
			t.Errorf("%s: resumed %v, want %v (resync reasons %q)", tc.name, got, tc.resume, r)
		}
		if !tc.resume && r.String() == "" {
			t.Errorf("%s: the refusal did not reach OnResync", tc.name)
		}
		// each run writes the file again with its own key: back to the first key's
		if !tc.resume {
			run(testKey)
		}
	}
}

// TestReadStateKeyed: what a keyed reader refuses, each as ErrStateAuth (an ErrStateFile):
// a file of checksum format, a flipped byte anywhere, another key's file, a cut MAC; a
// reader without a key refuses a keyed file as ErrStateFile.
func TestReadStateKeyed(t *testing.T) {
	var buf bytes.Buffer
	if _, err := writeState(&buf, "s", testKey, stateHead{index: 42}, []viewCapture{captureOf("events", map[string]string{"1": `{"id":1}`})}); err != nil {
		t.Fatal(err)
	}
	good := buf.Bytes()
	var sink memSink
	if head, _, err := readState(good, "s", testKey, &sink); err != nil || head.index != 42 || sink.rows["events"]["1"] != `{"id":1}` {
		t.Fatalf("keyed round trip: %v %+v %v", err, head, sink.rows)
	}
	flip := func(i int) []byte { b := bytes.Clone(good); b[i] ^= 1; return b }
	for name, b := range map[string][]byte{
		"checksum format": testStateFile(t),
		"flipped magic":   flip(7),
		"flipped row":     flip(len(good) - 33),
		"flipped mac":     flip(len(good) - 1),
		"cut mac":         good[:len(good)-8],
	} {
		_, _, err := readState(b, "s", testKey, &memSink{})
		if !errors.Is(err, ErrStateFile) {
			t.Errorf("%s: %v, want ErrStateFile", name, err)
		}
		if name != "flipped magic" && !errors.Is(err, ErrStateAuth) {
			t.Errorf("%s: %v, want ErrStateAuth", name, err)
		}
	}
	if _, _, err := readState(good, "s", otherKey, &memSink{}); !errors.Is(err, ErrStateAuth) {
		t.Errorf("another key: %v, want ErrStateAuth", err)
	}
	if _, _, err := readState(good, "s", nil, &memSink{}); !errors.Is(err, ErrStateFile) || !strings.Contains(err.Error(), "StateKey") {
		t.Errorf("no key: %v, want ErrStateFile naming StateKey", err)
	}
}

// TestStateKeyConfig: a key needs StateDir and at least 32 bytes; StateKeyFile reads one
// from a file (surrounding white space trimmed) and names the file, never the key.
func TestStateKeyConfig(t *testing.T) {
	base := Config{Addresses: []string{"h:1"}, Stream: "s", Service: "t"}
	for _, tc := range []struct {
		cfg  Config
		want string
	}{
		{Config{StateKey: testKey}, "StateKey: needs StateDir"},
		{Config{StateDir: "d", StateKey: []byte("short")}, "StateKey: 5 bytes, at least 32"},
	} {
		c := base
		c.StateDir, c.StateKey = tc.cfg.StateDir, tc.cfg.StateKey
		if err := c.Validate(); !errors.Is(err, ErrConfig) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%+v: %v, want %q", tc.cfg, err, tc.want)
		}
	}
	dir := t.TempDir()
	path := filepath.Join(dir, "state.key")
	os.WriteFile(path, []byte("  "+string(testKey)+"\n"), 0o600)
	if k, err := StateKeyFile(path); err != nil || !bytes.Equal(k, testKey) {
		t.Errorf("StateKeyFile: %q, %v", k, err)
	}
	os.WriteFile(path, []byte("tooshort\n"), 0o600)
	if _, err := StateKeyFile(path); err == nil || !strings.Contains(err.Error(), path) || strings.Contains(err.Error(), "tooshort") {
		t.Errorf("a short key file: %v, want an error naming the file and not the key", err)
	}
	if _, err := StateKeyFile(filepath.Join(dir, "missing")); err == nil {
		t.Error("a missing key file: no error")
	}
}

// FuzzReadStateKeyed: under a key, whatever the bytes, readState refuses them with an
// ErrStateFile or they are a file of the keyed format whose MAC verifies, and it then
// reads back the same after being written again with the key.
func FuzzReadStateKeyed(f *testing.F) {
	var buf bytes.Buffer
	if _, err := writeState(&buf, "s", testKey, stateHead{index: 42}, []viewCapture{captureOf("events", map[string]string{"1": `{"id":1}`})}); err != nil {
		f.Fatal(err)
	}
	f.Add(buf.Bytes())
	f.Add(testStateFile(f))
	f.Add([]byte(stateMagicMAC))
	f.Fuzz(func(t *testing.T, b []byte) {
		var sink memSink
		head, seen, err := readState(b, "s", testKey, &sink)
		if err != nil {
			if !errors.Is(err, ErrStateFile) {
				t.Fatalf("error not wrapping ErrStateFile: %v", err)
			}
			return
		}
		if !bytes.HasPrefix(b, []byte(stateMagicMAC)) {
			t.Fatalf("a file of another format accepted under a key: %q", b[:min(len(b), 8)])
		}
		var caps []viewCapture
		for name := range seen {
			caps = append(caps, captureOf(name, sink.rows[name]))
		}
		var out bytes.Buffer
		if _, err := writeState(&out, "s", testKey, head, caps); err != nil {
			t.Fatal(err)
		}
		if again, _, err := readState(out.Bytes(), "s", testKey, &memSink{}); err != nil || again.index != head.index {
			t.Fatalf("re-written file: %v, index %d (was %d)", err, again.index, head.index)
		}
	})
}
