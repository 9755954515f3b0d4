package bench

import (
	"flag"
	"io"
	"runtime"
	"slices"
	"strconv"
	"testing"
)

func TestInts(t *testing.T) {
	got, err := Ints("2, 5,10 ,20")
	if err != nil || !slices.Equal(got, []int{2, 5, 10, 20}) {
		t.Errorf("Ints = %v, %v", got, err)
	}
	for _, bad := range []string{"", "1,,2", "1,x"} {
		if _, err := Ints(bad); err == nil {
			t.Errorf("Ints(%q) accepted", bad)
		}
	}
}

func TestHasSystem(t *testing.T) {
	const list = "bare,barekafka, player"
	for name, want := range map[string]bool{"bare": true, "barekafka": true, "player": true, "kafka": false, "play": false} {
		if got := HasSystem(list, name); got != want {
			t.Errorf("HasSystem(%q, %q) = %v, want %v", list, name, got, want)
		}
	}
}

func TestSplitBrokers(t *testing.T) {
	if _, err := splitBrokers(""); err == nil {
		t.Error("no brokers accepted")
	}
	got, err := splitBrokers("a:9092,b:9092")
	if err != nil || !slices.Equal(got, []string{"a:9092", "b:9092"}) {
		t.Errorf("splitBrokers = %v, %v", got, err)
	}
}

func TestProfileFlags(t *testing.T) {
	fs := flag.NewFlagSet("x", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	p := profileFlags(fs)
	if err := fs.Parse([]string{"-cpuprofile", "c", "-memprofile", "m", "-trace", "t", "-mutexprofile", "x", "-blockprofile", "b"}); err != nil {
		t.Fatal(err)
	}
	if want := (profileFiles{CPU: "c", Mem: "m", Trace: "t", Mutex: "x", Block: "b"}); *p != want {
		t.Errorf("profiles = %+v, want %+v", *p, want)
	}
	stop, err := (profileFiles{}).Start()
	if err != nil {
		t.Fatal(err)
	}
	stop()
}

func TestLayout(t *testing.T) {
	if got, want := Layout(), "GOMAXPROCS="+strconv.Itoa(runtime.GOMAXPROCS(0))+", receivers in this process"; got != want {
		t.Errorf("Layout = %q, want %q", got, want)
	}
}
