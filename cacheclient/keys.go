package cacheclient

import "github.com/statecast/statecast/schemas/record"

// Key returns the key text of a row from the texts of its key columns, in the view's key
// column order: the row's record key without its view prefix, each column escaped ("\"
// as "\\", "|" as "\|") and the columns joined by "|" (schemas/README.md, record key).
// Get, ByIndexKeys, Range, Change.Key and decoders all use this form. A one-column key
// needs escaping too: a sport "a|b:c d" is stored under Key("a|b:c d") == `a\|b:c d`, and
// Get("a|b:c d") does not find it. Column texts without "\" or "|" are their own key text.
func Key(parts ...string) string { return record.JoinKey(parts...) }

// SplitKey is the inverse of Key: it returns the texts of a key's columns. Its error wraps
// record.ErrBadKey.
func SplitKey(key string) ([]string, error) { return record.SplitKey(key) }
