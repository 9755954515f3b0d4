package cacheclient

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
)

// escape writes "\" as "\\" and "|" as "\|" (schemas/README.md, record key).
func escape(s string) string {
	if !strings.ContainsAny(s, `\|`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' || s[i] == '|' {
			b.WriteByte('\\')
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// Key returns the key text of a row from its key columns' key texts (for a one-column key,
// the column's text itself): the record key without its view prefix, as Get expects it.
func Key(parts ...string) string {
	if len(parts) == 1 {
		return escape(parts[0])
	}
	es := make([]string, len(parts))
	for i, p := range parts {
		es[i] = escape(p)
	}
	return strings.Join(es, "|")
}

// SplitKey is the inverse of Key: it returns the key texts of a key's columns.
func SplitKey(key string) ([]string, error) {
	var parts []string
	var b strings.Builder
	for i := 0; i < len(key); i++ {
		switch key[i] {
		case '\\':
			if i+1 >= len(key) || (key[i+1] != '\\' && key[i+1] != '|') {
				return nil, fmt.Errorf("cacheclient: bad escape at %d in key %q", i, key)
			}
			i++
			b.WriteByte(key[i])
		case '|':
			parts = append(parts, b.String())
			b.Reset()
		default:
			b.WriteByte(key[i])
		}
	}
	return append(parts, b.String()), nil
}

// epochEnd is the value of an epoch-end control record (schemas/README.md).
type epochEnd struct {
	Epoch int64
	Rows  int64
	Hash  uint64
}

func parseEpochEnd(b []byte) (epochEnd, error) {
	var raw struct {
		Epoch *int64  `json:"epoch"`
		Rows  *int64  `json:"rows"`
		Hash  *string `json:"hash"`
	}
	if err := json.Unmarshal(b, &raw); err != nil {
		return epochEnd{}, err
	}
	if raw.Epoch == nil || raw.Rows == nil || raw.Hash == nil {
		return epochEnd{}, fmt.Errorf("epoch-end value %q lacks epoch, rows or hash", b)
	}
	if len(*raw.Hash) != 16 {
		return epochEnd{}, fmt.Errorf("epoch-end hash %q is not 16 hex digits", *raw.Hash)
	}
	h, err := strconv.ParseUint(*raw.Hash, 16, 64)
	if err != nil {
		return epochEnd{}, fmt.Errorf("epoch-end hash %q: %v", *raw.Hash, err)
	}
	return epochEnd{Epoch: *raw.Epoch, Rows: *raw.Rows, Hash: h}, nil
}
