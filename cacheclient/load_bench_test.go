package cacheclient

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"testing"

	gojson "github.com/goccy/go-json"
)

// BenchmarkStateLoad measures reading a state file of 1,000,000 rows into a view (decode
// included), the client-side part of a restart from StateDir; and the snapshot staging
// path on its own (what a snapshot bootstrap costs after the network).
func BenchmarkStateLoad(b *testing.B) {
	const n = 1_000_000
	rows := make(map[string]string, n)
	for k := range n {
		rows[fmt.Sprint(k)] = fmt.Sprintf(`{"id":%d,"sport":"sport-%d","tags":["t"]}`, k, k%50)
	}
	var file bytes.Buffer
	if _, err := writeState(&file, "s", nil, stateHead{index: 42}, []viewCapture{captureOf("events", rows)}); err != nil {
		b.Fatal(err)
	}
	// The service's decoder: github.com/goccy/go-json (file+json); encoding/json for reference.
	decodeJSON := func(_ string, v []byte) (event, error) {
		var e event
		err := gojson.UnmarshalNoEscape(v, &e)
		return e, err
	}
	decodeStd := func(_ string, v []byte) (event, error) { var e event; err := json.Unmarshal(v, &e); return e, err }
	// The rows staged one by one as readState reads them (encoding/json for reference).
	sequential := func(decode Decoder[event]) func(b *testing.B) {
		return func(b *testing.B) {
			for range b.N {
				c := newTestClient(b)
				c.keepRaw = true
				v, _ := Register(c, "events", decode)
				head, _, err := readState(file.Bytes(), "s", nil, clientSink{c})
				if err != nil {
					b.Fatal(err)
				}
				v.endReplace(head.index)
				v.commit(head.index)
			}
			b.ReportMetric(float64(n*b.N)/b.Elapsed().Seconds(), "keys/s")
		}
	}
	b.Run("file+encoding/json", sequential(decodeStd))
	b.Run("file+json-sequential-staging", sequential(decodeJSON))
	b.Run("file+json", func(b *testing.B) { // what Client.loadState does
		for range b.N {
			c := newTestClient(b)
			c.keepRaw = true
			v, _ := Register(c, "events", decodeJSON)
			data := file.Bytes()
			head, views, err := verifyState(data, c)
			if err != nil {
				b.Fatal(err)
			}
			fv := views["events"]
			v.loadRows(data[:len(data)-8], fv.offs, fv.rows)
			v.endReplace(head.index)
			v.commit(head.index)
			if v.Len() != n {
				b.Fatal(v.Len())
			}
		}
		b.ReportMetric(float64(n*b.N)/b.Elapsed().Seconds(), "keys/s")
	})
	b.Run("stage-only", func(b *testing.B) {
		keys := make([]string, 0, n)
		for k := range rows {
			keys = append(keys, k)
		}
		val := []byte("{}")
		for range b.N {
			c := newTestClient(b)
			v, _ := Register(c, "events", func(string, []byte) (int, error) { return 1, nil })
			v.beginReplace()
			for _, k := range keys {
				v.stageRow(row{key: k, fullKey: []byte(k), value: val})
			}
			v.endReplace(1)
			v.commit(1)
		}
		b.ReportMetric(float64(n*b.N)/b.Elapsed().Seconds(), "keys/s")
	})
}

// BenchmarkOrderSort: the staging sort of 1,000,000 rows, radix vs slices.SortFunc.
func BenchmarkOrderSort(b *testing.B) {
	src := make([]pos, 1_000_000)
	for i := range src {
		src[i] = pos{sk: trieOrder(hashKey(fmt.Sprint(i))), i: int32(i)}
	}
	a := make([]pos, len(src))
	b.Run("radix", func(b *testing.B) {
		for range b.N {
			copy(a, src)
			radixSort(a)
		}
	})
	b.Run("pdqsort", func(b *testing.B) {
		for range b.N {
			copy(a, src)
			slices.SortFunc(a, func(x, y pos) int { return cmpU64(x.sk, y.sk) })
		}
	})
}

// clientSink stages the rows of a state file into the client's views one by one (the
// sequential path before loadRows; kept for the benchmarks' comparisons).
type clientSink struct{ c *Client }

func (k clientSink) view(name string) bool {
	v, ok := k.c.byName[name]
	if ok {
		v.beginReplace()
	}
	return ok
}

func (k clientSink) reserve(view string, rows int) { k.c.byName[view].reserveReplace(rows) }

func (k clientSink) row(view, key string, raw []byte) {
	v := k.c.byName[view]
	v.stageRow(row{key: key, value: raw, index: -1, stable: true})
}
