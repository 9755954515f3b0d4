package distributor

import (
	"testing"

	"github.com/IBM/sarama"

	"github.com/statecast/statecast/schemas/record"
)

// FuzzParseConfig: any input gives a config or an error, never a panic.
func FuzzParseConfig(f *testing.F) {
	f.Add([]byte(goodYAML))
	f.Add([]byte("streams: [{topic: a, views: [{name: v, sql: x, key: [k], overlap: 3}]}]"))
	f.Add([]byte("{"))
	f.Fuzz(func(t *testing.T, b []byte) {
		c, err := ParseConfig(b)
		if err == nil && (len(c.Streams) == 0 || c.Postgres.DSN == "") {
			t.Fatalf("accepted an incomplete config: %+v", c)
		}
	})
}

// FuzzApplyRestored: any record read back from a topic updates the state or is skipped
// with an error, never a panic; a row's hash is recorded only for a configured view.
func FuzzApplyRestored(f *testing.F) {
	f.Add([]byte("items|1"), []byte(`{"id":1}`), "items", "row", "3")
	f.Add([]byte("!ctl|items|poll"), []byte(`{"watermark":"5","source_lsn":"0/1","source_time":""}`), "items", "poll", "1")
	f.Add([]byte("!ctl|items|end"), []byte(`{"epoch":2}`), "items", "epoch-end", "2")
	f.Add([]byte("x"), []byte(nil), "other", "row", "x")
	f.Add([]byte("!ctl|position"), []byte(`{"lsn":"0/5","time":"2026-11-30T00:00:00Z"}`), "", "position", "0")
	f.Fuzz(func(t *testing.T, key, value []byte, view, kind, epoch string) {
		views := map[string]*viewState{"items": newViewState(&ViewConfig{Name: "items"})}
		m := &sarama.ConsumerMessage{Key: key, Value: value, Headers: []*sarama.RecordHeader{
			{Key: []byte("sc-view"), Value: []byte(view)},
			{Key: []byte("sc-kind"), Value: []byte(kind)},
			{Key: []byte("sc-epoch"), Value: []byte(epoch)},
		}}
		var pos record.Position
		if err := applyRestored(m, views, &pos); err == nil && view != "items" && len(views["items"].hashes) != 0 {
			t.Fatal("a record of another view changed items")
		}
	})
}
