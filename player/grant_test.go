package player

import (
	"slices"
	"testing"
	"time"

	"github.com/IBM/sarama"
	"google.golang.org/protobuf/proto"

	"github.com/statecast/statecast/schemas/gen/statecast/v1"
	"github.com/statecast/statecast/schemas/record"
)

// TestPositionStaleCutToViews: a position entry that names stale views reaches a target
// limited to some views with only those views in its stale list; a target of every view,
// and a batch whose stale views are all the target's, are sent as they are (shared bytes).
func TestPositionStaleCutToViews(t *testing.T) {
	posMsg := func(off int64, stale ...string) *sarama.ConsumerMessage {
		value := (&record.Position{LSN: "0/10", Time: time.Unix(5, 0), Stale: stale}).Marshal()
		m := &sarama.ConsumerMessage{Offset: off, Key: record.PositionKey(), Value: value}
		for _, h := range (record.Meta{Kind: record.KindPosition, SourceLSN: "0/10"}).Headers() {
			m.Headers = append(m.Headers, &sarama.RecordHeader{Key: h.Key, Value: h.Value})
		}
		return m
	}
	staleSent := func(it *item) []string {
		var e statecastv1.Entry
		if err := proto.Unmarshal(it.wire, &e); err != nil {
			t.Fatal(err)
		}
		if e.Index != it.index || e.Kind != statecastv1.Kind_KIND_POSITION {
			t.Fatalf("re-made entry: index %d kind %v, want %d POSITION", e.Index, e.Kind, it.index)
		}
		p, err := record.ParsePosition(e.Value)
		if err != nil {
			t.Fatal(err)
		}
		return p.Stale
	}
	row := itemOf(&sarama.ConsumerMessage{Offset: 6, Key: []byte("odds|1"), Value: []byte(`{}`)})
	pos := itemOf(posMsg(7, "odds", "secret_view"))
	clean := itemOf(posMsg(8, "odds"))
	batch := []*item{row, pos, clean}

	limited := &target{views: viewSet{"odds"}}
	got := limited.visibleTo(batch)
	if got[0] != row || got[2] != clean {
		t.Fatal("entries without foreign stale views were re-made")
	}
	if s := staleSent(got[1]); !slices.Equal(s, []string{"odds"}) {
		t.Fatalf("limited target sees stale %q, want [odds]", s)
	}
	if s := staleSent(batch[1]); !slices.Equal(s, []string{"odds", "secret_view"}) {
		t.Fatalf("the shared entry changed: stale %q", s)
	}
	other := &target{views: viewSet{"prices"}}
	if s := staleSent(other.visibleTo([]*item{pos})[0]); len(s) != 0 {
		t.Fatalf("a target of neither stale view sees %q", s)
	}
	all := &target{}
	if got := all.visibleTo(batch); &got[0] != &batch[0] {
		t.Fatal("a target of every view got a copy")
	}
	if got := limited.visibleTo([]*item{row, clean}); got[1] != clean {
		t.Fatal("a batch without foreign stale views was copied")
	}
}

// TestGrantPatterns: `*` alone matches every name, a SPIFFE id and a name with `/` too;
// within a longer pattern `*` stops at `/` (path.Match), so that a pattern of one path
// segment grants no deeper identity.
func TestGrantPatterns(t *testing.T) {
	a := &access{grants: []Grant{
		{Principals: []string{"*"}, Streams: []string{"open"}, Views: []string{"*"}},
		{Principals: []string{"spiffe://td/ns/*/sa/risk"}, Streams: []string{"*"}, Views: []string{"*"}},
	}}
	for _, c := range []struct {
		principal, stream string
		ok                bool
	}{
		{"pricing", "open", true},
		{"spiffe://td/ns/prod/sa/pricing", "open", true},
		{"team/a/b", "open", true},
		{"spiffe://td/ns/prod/sa/risk", "any/stream", true},
		{"spiffe://td/ns/prod/x/sa/risk", "closed", false},
		{"pricing", "closed", false},
	} {
		err := a.authorize(Principal{Name: c.principal, Method: "certificate"}, c.stream, []string{"v1"})
		if (err == nil) != c.ok {
			t.Errorf("%s reading %s: %v, want allowed %v", c.principal, c.stream, err, c.ok)
		}
	}
}
