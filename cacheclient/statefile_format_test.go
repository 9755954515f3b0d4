package cacheclient

import (
	"bytes"
	"encoding/hex"
	"testing"
)

// goldenStateFile is a format-5 state file as writeState lays it out: stream "s", topic ID
// "T", index 7, a source position 0/10 with view "b" behind at 0/8, and one view "v" held
// whole with the row "k" = "{}", then its xxhash64. The Java client's StateFileTest holds
// the same bytes: both clients write and read one format.
const goldenStateFile = "5343535441544535017301540e031000010162080101760001016b027b7d" + "24ac2843eca1eac0"

func TestStateFileGolden(t *testing.T) {
	head := stateHead{index: 7, topic: "T", src: sourceState{seen: true, hasLSN: true, lsn: 0x10, behind: map[string]LSN{"b": 8}}}
	caps := []viewCapture{{name: "v", rows: func(fn func(key, raw string) bool) { fn("k", "{}") }}}
	var b bytes.Buffer
	if _, err := writeState(&b, "s", nil, head, caps); err != nil {
		t.Fatal(err)
	}
	if got := hex.EncodeToString(b.Bytes()); got != goldenStateFile {
		t.Fatalf("writeState:\n got %s\nwant %s", got, goldenStateFile)
	}
	g, _ := hex.DecodeString(goldenStateFile)
	sink := &recordSink{}
	h, _, err := readState(g, "s", nil, sink)
	if err != nil || h.index != 7 || h.topic != "T" || h.src.lsn != 0x10 || h.src.behind["b"] != 8 || len(sink.rows) != 1 || sink.rows[0] != "v k {}" {
		t.Fatalf("readState: head %+v, rows %q, err %v", h, sink.rows, err)
	}
}

// recordSink keeps every row readState gives it, as "view key raw".
type recordSink struct{ rows []string }

func (*recordSink) view(string) bool    { return true }
func (*recordSink) reserve(string, int) {}
func (r *recordSink) row(view, key string, raw []byte) {
	r.rows = append(r.rows, view+" "+key+" "+string(raw))
}
