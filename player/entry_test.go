package player

import (
	"bytes"
	"slices"
	"testing"
	"time"

	"github.com/IBM/sarama"
	"google.golang.org/protobuf/proto"

	"github.com/statecast/statecast/schemas/gen/statecast/v1"
	"github.com/statecast/statecast/schemas/record"
)

// FuzzItemBatch: any Kafka record decodes into an entry, and a batch made of
// pre-marshalled entries is a valid SubscribeResponse holding exactly those entries.
func FuzzItemBatch(f *testing.F) {
	f.Add([]byte("a|1"), []byte(`{"x":1}`), []byte("a"), []byte("row"), []byte("3"), int64(5), false)
	f.Add([]byte("!ctl|a|poll"), []byte(`{}`), []byte("a"), []byte("poll"), []byte("x"), int64(0), true)
	f.Add([]byte{}, []byte(nil), []byte("bad|view"), []byte("zzz"), []byte("-1"), int64(1<<40), true)
	f.Fuzz(func(t *testing.T, key, value, view, kind, epoch []byte, off int64, tomb bool) {
		if tomb {
			value = nil
		} else if value == nil {
			value = []byte{}
		}
		if off < 0 {
			off = -off
		}
		m := &sarama.ConsumerMessage{Key: key, Value: value, Offset: off, Timestamp: time.Unix(1, 0), Headers: []*sarama.RecordHeader{
			{Key: []byte("sc-view"), Value: view}, {Key: []byte("sc-kind"), Value: kind}, {Key: []byte("sc-epoch"), Value: epoch},
		}}
		it := itemOf(m)
		it2 := itemOf(&sarama.ConsumerMessage{Key: []byte("b|2"), Value: []byte("v"), Offset: off + 3})
		var got statecastv1.SubscribeResponse
		if err := proto.Unmarshal(encodeBatch([]*item{it, it2}), &got); err != nil {
			t.Fatalf("batch does not decode: %v", err)
		}
		es := got.GetBatch().GetEntries()
		if len(es) != 2 || es[0].Index != off || es[1].Index != off+3 {
			t.Fatalf("entries %v", es)
		}
		if !bytes.Equal(es[0].Key, key) || es[0].Tombstone != (value == nil) || (!tomb && !bytes.Equal(es[0].Value, value)) {
			t.Fatalf("entry %v from key %q value %q", es[0], key, value)
		}
		var one statecastv1.SubscribeResponse
		if err := proto.Unmarshal(encodeBatch([]*item{it}), &one); err != nil || len(one.GetBatch().GetEntries()) != 1 || !proto.Equal(one.GetBatch().GetEntries()[0], es[0]) {
			t.Fatalf("one-entry frame %v (%v), want %v", one.GetBatch(), err, es[0])
		}
		if es[0].View != it.view {
			t.Fatalf("view %q vs item %q", es[0].View, it.view)
		}
	})
}

// TestBatchPartsCodec: a multi-entry batch sent as parts through the codec (as the sender
// does) decodes to the entries in order, also for an item without its own one-entry frame.
func TestBatchPartsCodec(t *testing.T) {
	a := itemOf(&sarama.ConsumerMessage{Key: []byte("v|1"), Value: []byte(`{"a":1}`), Offset: 7})
	b := itemOf(&sarama.ConsumerMessage{Key: []byte("v|2"), Value: nil, Offset: 9})
	c := &item{index: 12, wire: slices.Clone(a.wire)}
	bs, err := newCodec().Marshal(batchParts([]*item{a, b, c}))
	if err != nil {
		t.Fatal(err)
	}
	var got statecastv1.SubscribeResponse
	if err := proto.Unmarshal(bs.Materialize(), &got); err != nil {
		t.Fatal(err)
	}
	es := got.GetBatch().GetEntries()
	if len(es) != 3 || es[0].GetIndex() != 7 || es[1].GetIndex() != 9 || !es[1].GetTombstone() || es[2].GetIndex() != 7 {
		t.Fatalf("entries %v", es)
	}
	if one := batchParts([]*item{a}); len(one) != 1 || &one[0][0] != &a.single[0] {
		t.Fatal("a one-entry batch is not the item's own frame")
	}
}

// TestWithHead: head_index appended to a batch, a one-entry frame and a progress message
// decodes as the message's HeadIndex, the rest of the message unchanged; 0 adds nothing.
func TestWithHead(t *testing.T) {
	a := itemOf(&sarama.ConsumerMessage{Key: []byte("v|1"), Value: []byte(`{"a":1}`), Offset: 7})
	b := itemOf(&sarama.ConsumerMessage{Key: []byte("v|2"), Value: []byte(`{"b":2}`), Offset: 9})
	for name, tc := range map[string]struct {
		parts   rawParts
		entries int
	}{
		"batch":    {batchParts([]*item{a, b}), 2},
		"one":      {batchParts([]*item{a}), 1},
		"progress": {rawParts{encodeProgress(5, nil)}, 0},
	} {
		for _, head := range []int64{0, 9, 1 << 40} {
			bs, err := newCodec().Marshal(withHead(tc.parts, head))
			if err != nil {
				t.Fatal(err)
			}
			var got statecastv1.SubscribeResponse
			if err := proto.Unmarshal(bs.Materialize(), &got); err != nil {
				t.Fatalf("%s head %d: %v", name, head, err)
			}
			if got.GetHeadIndex() != head || len(got.GetBatch().GetEntries()) != tc.entries {
				t.Fatalf("%s head %d: got head %d, %d entries", name, head, got.GetHeadIndex(), len(got.GetBatch().GetEntries()))
			}
			if tc.entries == 0 && got.GetProgress().GetIndex() != 5 {
				t.Fatalf("%s: progress %v", name, got.GetProgress())
			}
		}
	}
	if p := batchParts([]*item{a}); len(withHead(p, 0)) != 1 {
		t.Fatal("head 0 added a part")
	}
}

// TestItemOfPositionAndTxn: a position record becomes an entry of kind POSITION without a
// view, its value the position's JSON; sc-txn becomes Entry.txn.
func TestItemOfPositionAndTxn(t *testing.T) {
	msg := func(off int64, key, value []byte, meta record.Meta) *sarama.ConsumerMessage {
		m := &sarama.ConsumerMessage{Offset: off, Key: key, Value: value}
		for _, h := range meta.Headers() {
			m.Headers = append(m.Headers, &sarama.RecordHeader{Key: h.Key, Value: h.Value})
		}
		return m
	}
	pos := (&record.Position{LSN: "16/B374D848", Time: time.Unix(5, 0)}).Marshal()
	for _, tt := range []struct {
		m    *sarama.ConsumerMessage
		kind statecastv1.Kind
		view string
		txn  bool
	}{
		{msg(3, record.EncodeKey("a", "1"), []byte(`{}`), record.Meta{View: "a", Kind: record.KindRow, Txn: true}), statecastv1.Kind_KIND_ROW, "a", true},
		{msg(4, record.EncodeKey("a", "2"), nil, record.Meta{View: "a", Kind: record.KindRow}), statecastv1.Kind_KIND_ROW, "a", false},
		{msg(5, record.PositionKey(), pos, record.Meta{Kind: record.KindPosition, SourceLSN: "16/B374D848"}), statecastv1.Kind_KIND_POSITION, "", false},
	} {
		it := itemOf(tt.m)
		var got statecastv1.SubscribeResponse
		if err := proto.Unmarshal(encodeBatch([]*item{it}), &got); err != nil {
			t.Fatal(err)
		}
		e := got.GetBatch().GetEntries()[0]
		if e.Kind != tt.kind || e.View != tt.view || e.Txn != tt.txn || it.txn != tt.txn || it.kind != tt.kind ||
			it.isPosition() != (tt.kind == statecastv1.Kind_KIND_POSITION) || !bytes.Equal(e.Value, tt.m.Value) {
			t.Errorf("offset %d: entry %v (item kind %v txn %v)", tt.m.Offset, e, it.kind, it.txn)
		}
	}
}

// FuzzPoisonHeaderKey: for any key and any sc-view header (or none), the player serves a
// row exactly when its key is a key of the view it is served as (record.KeyView, the rule
// the client applies to every entry), so that no client is given a row it must refuse;
// keyOfView decides as record.KeyView does.
func FuzzPoisonHeaderKey(f *testing.F) {
	f.Add([]byte("a|1"), "a", true)
	f.Add([]byte("a|1"), "b", true)
	f.Add([]byte(`a\|b|1`), "a|b", true)
	f.Add([]byte("|x"), "", false)
	f.Add([]byte("a.b-c|x|y"), "a.b-c", false)
	f.Add([]byte("!ctl|a|poll"), "a", true)
	f.Fuzz(func(t *testing.T, key []byte, view string, header bool) {
		m := &sarama.ConsumerMessage{Key: key, Value: []byte("{}"), Offset: 1, Timestamp: time.Unix(1, 0)}
		if header {
			m.Headers = []*sarama.RecordHeader{{Key: []byte(record.HeaderView), Value: []byte(view)}, {Key: []byte("sc-kind"), Value: []byte("row")}}
		}
		it := itemOf(m)
		kv, kerr := record.KeyView(key)
		for _, v := range []string{view, kv, it.view} {
			if got, want := keyOfView(string(key), v), kerr == nil && kv == v; got != want {
				t.Fatalf("keyOfView(%q, %q) = %v, record.KeyView says %q, %v", key, v, got, kv, kerr)
			}
		}
		if !it.isRow() {
			return
		}
		served := poison(it, DefaultMaxRecordBytes) == ""
		if want := kerr == nil && kv == it.view; served != want {
			t.Fatalf("key %q served as view %q: served %v, but the key's view is %q (%v)", key, it.view, served, kv, kerr)
		}
	})
}
