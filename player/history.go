package player

import (
	"cmp"
	"slices"
)

// history is the stream's recent records in log order (every record the main fetcher
// read, all views), bounded by bytes. Recovery fetchers read from it (historySource)
// instead of Kafka when their range is still in it: one decoded item shared by all
// targets instead of a Kafka fetch and a decode per recovering target. Guarded by
// stream.mu.
type history struct {
	items   []*item
	head    int
	bytes   int64
	max     int64
	evicted int64 // every record with index > evicted that was read is in items
}

func (h *history) add(it *item) {
	h.items = append(h.items, it)
	h.bytes += int64(it.size())
	for h.bytes > h.max && h.head < len(h.items)-1 {
		old := h.items[h.head]
		h.items[h.head] = nil
		h.head++
		h.bytes -= int64(old.size())
		h.evicted = old.index
	}
	if h.head > 4096 && h.head*2 > len(h.items) {
		n := copy(h.items, h.items[h.head:])
		clear(h.items[n:])
		h.items, h.head = h.items[:n], 0
	}
}

// since appends to dst up to max items with index >= from, in order. ok is false when
// records at or after from may have been evicted (the caller must read Kafka instead).
func (h *history) since(dst []*item, from int64, max int) ([]*item, bool) {
	if from <= h.evicted {
		return dst, false
	}
	live := h.items[h.head:]
	i, _ := slices.BinarySearchFunc(live, from, func(it *item, x int64) int { return cmp.Compare(it.index, x) })
	end := min(len(live), i+max)
	return append(dst, live[i:end]...), true
}
