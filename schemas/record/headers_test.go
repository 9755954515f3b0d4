package record

import (
	"errors"
	"testing"
	"time"
)

func TestMetaRoundTrip(t *testing.T) {
	m := Meta{View: "events", Kind: KindRow, Epoch: 7,
		SourceTime: time.Date(2026, 11, 29, 19, 25, 6, 123456000, time.FixedZone("x", 3600)), SourceLSN: "0/16B3748"}
	hs := m.Headers()
	if len(hs) != 5 || string(hs[3].Value) != "2026-11-29T18:25:06.123456Z" || string(hs[2].Value) != "7" {
		t.Fatalf("headers = %q", hs)
	}
	got, err := ParseHeaders(append(hs, Header{Key: []byte("other"), Value: []byte("x")}))
	if err != nil {
		t.Fatal(err)
	}
	if got.View != m.View || got.Kind != m.Kind || got.Epoch != m.Epoch || !got.SourceTime.Equal(m.SourceTime) || got.SourceLSN != m.SourceLSN {
		t.Fatalf("ParseHeaders = %+v, want %+v", got, m)
	}
}

func TestStreamLevelAndTxnHeaders(t *testing.T) {
	pos := Meta{Kind: KindPosition, SourceLSN: "0/5", SourceTime: time.Unix(0, 0)}
	hs := pos.Headers()
	for _, h := range hs {
		if string(h.Key) == HeaderView || string(h.Key) == HeaderTxn {
			t.Fatalf("position headers carry %s", h.Key)
		}
	}
	if got, err := ParseHeaders(hs); err != nil || got.Kind != KindPosition || got.View != "" || got.SourceLSN != "0/5" {
		t.Fatalf("ParseHeaders(position) = %+v, %v", got, err)
	}
	row := Meta{View: "v", Kind: KindRow, Epoch: 1, Txn: true}
	got, err := ParseHeaders(row.Headers())
	if err != nil || !got.Txn || got.SourceLSN != "" {
		t.Fatalf("ParseHeaders(txn row) = %+v, %v", got, err)
	}
	h := func(k, v string) Header { return Header{Key: []byte(k), Value: []byte(v)} }
	for name, hs := range map[string][]Header{
		"position with a view": {h(HeaderView, "v"), h(HeaderKind, "position"), h(HeaderEpoch, "0")},
		"txn not 1":            {h(HeaderView, "v"), h(HeaderKind, "row"), h(HeaderEpoch, "0"), h(HeaderTxn, "yes")},
		"row without a view":   {h(HeaderKind, "row"), h(HeaderEpoch, "0")},
	} {
		if _, err := ParseHeaders(hs); !errors.Is(err, ErrBadHeader) {
			t.Errorf("%s: err = %v, want ErrBadHeader", name, err)
		}
	}
}

func TestParseHeadersErrors(t *testing.T) {
	h := func(k, v string) Header { return Header{Key: []byte(k), Value: []byte(v)} }
	ok := []Header{h(HeaderView, "v"), h(HeaderKind, "row"), h(HeaderEpoch, "1")}
	tests := map[string][]Header{
		"no view":  ok[1:],
		"no kind":  {ok[0], ok[2]},
		"no epoch": ok[:2],
		"bad kind": append([]Header{h(HeaderKind, "rows")}, ok...),
		"bad view": append([]Header{h(HeaderView, "a|b")}, ok[1:]...),
		"bad ep":   append([]Header{h(HeaderEpoch, "-1")}, ok[:2]...),
		"bad time": append([]Header{h(HeaderSourceTime, "yesterday")}, ok...),
	}
	for name, hs := range tests {
		if _, err := ParseHeaders(hs); !errors.Is(err, ErrBadHeader) {
			t.Errorf("%s: err = %v, want ErrBadHeader", name, err)
		}
	}
	if _, err := ParseHeaders(ok); err != nil {
		t.Fatalf("minimal headers: %v", err)
	}
}
