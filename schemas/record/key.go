package record

import (
	"bytes"
	"fmt"
	"strings"
)

// ControlPrefix starts the key of every control record. No view name can be "!ctl", so
// control keys never collide with row keys.
const ControlPrefix = "!ctl"

// ValidViewName reports whether name matches [A-Za-z_][A-Za-z0-9_.-]*.
func ValidViewName(name string) bool {
	if name == "" {
		return false
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		switch {
		case c == '_' || c >= 'A' && c <= 'Z' || c >= 'a' && c <= 'z':
		case i > 0 && (c >= '0' && c <= '9' || c == '.' || c == '-'):
		default:
			return false
		}
	}
	return true
}

// EncodeKey returns the record key of a row: esc(view) "|" esc(part) ... (see README).
// It is KeyPrefix(view) followed by JoinKey(parts...). The view name is not validated
// here; callers validate it once with ValidViewName.
func EncodeKey(view string, parts ...string) []byte {
	return appendParts(AppendEscaped(make([]byte, 0, partsLen(parts)+len(view)+4), view), parts)
}

// KeyPrefix returns esc(view) "|", the prefix of the record key of every row of view.
func KeyPrefix(view string) []byte {
	return append(AppendEscaped(make([]byte, 0, len(view)+1), view), '|')
}

// JoinKey returns a row's key within its view: its record key without the view prefix,
// esc(part) ["|" esc(part) ...]. EncodeKey(view, parts...) is KeyPrefix(view) followed by
// JoinKey(parts...). A single part that needs no escaping is returned as it is (no
// allocation). SplitKey is the inverse.
func JoinKey(parts ...string) string {
	switch {
	case len(parts) == 0:
		return ""
	case len(parts) == 1 && !strings.ContainsAny(parts[0], `\|`):
		return parts[0]
	}
	return string(appendParts(make([]byte, 0, partsLen(parts)+2), parts)[1:])
}

// appendParts appends "|" esc(part) for each part.
func appendParts(dst []byte, parts []string) []byte {
	for _, p := range parts {
		dst = AppendEscaped(append(dst, '|'), p)
	}
	return dst
}

// partsLen is the length of the parts with their separators, before escaping.
func partsLen(parts []string) int {
	n := len(parts)
	for _, p := range parts {
		n += len(p)
	}
	return n
}

// AppendEscaped appends esc(s) to dst: "\" becomes "\\" and "|" becomes "\|".
func AppendEscaped[S string | []byte](dst []byte, s S) []byte {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c == '\\' || c == '|' {
			dst = append(dst, '\\')
		}
		dst = append(dst, c)
	}
	return dst
}

// DecodeKey splits a record key into its view and parts, undoing the escaping.
// A key needs a view and at least one part. Control keys decode too (view "!ctl").
func DecodeKey(key []byte) (view string, parts []string, err error) {
	fields, err := split(key)
	if err != nil {
		return "", nil, err
	}
	if len(fields) < 2 {
		return "", nil, fmt.Errorf("%w: no key part in %q", ErrBadKey, key)
	}
	return fields[0], fields[1:], nil
}

// SplitKey is the inverse of JoinKey: it splits a row's key within its view (its record
// key without the view prefix) into its parts, undoing the escaping. Every string splits
// into at least one part ("" is the one empty part).
func SplitKey(key string) ([]string, error) { return split(key) }

// split splits s at its unescaped "|" and unescapes the fields.
func split[S string | []byte](s S) ([]string, error) {
	var cur []byte
	var fields []string
	escaped := false
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case escaped:
			if c != '\\' && c != '|' {
				return nil, fmt.Errorf("%w: bad escape \\%c at byte %d", ErrBadKey, c, i)
			}
			cur = append(cur, c)
			escaped = false
		case c == '\\':
			escaped = true
		case c == '|':
			fields = append(fields, string(cur))
			cur = cur[:0]
		default:
			cur = append(cur, c)
		}
	}
	if escaped {
		return nil, fmt.Errorf("%w: trailing backslash", ErrBadKey)
	}
	return append(fields, string(cur)), nil
}

// KeyView returns the (unescaped) view of a key without decoding its parts. Valid view
// names need no escaping, so this is a scan to the first unescaped "|".
func KeyView(key []byte) (string, error) {
	i := bytes.IndexByte(key, '|')
	if i <= 0 || bytes.IndexByte(key[:i], '\\') >= 0 {
		view, _, err := DecodeKey(key)
		return view, err
	}
	return string(key[:i]), nil
}

// ControlKey returns the key of the control record of the given kind for view:
// "!ctl|<view>|begin", "!ctl|<view>|end" or "!ctl|<view>|poll". A stream-level kind
// (KindPosition) has no view: "!ctl|position".
func ControlKey(view string, kind Kind) []byte {
	if kind.IsStream() {
		return EncodeKey(ControlPrefix, kind.controlSuffix())
	}
	return EncodeKey(ControlPrefix, view, kind.controlSuffix())
}

// PositionKey is the key of every position record ("!ctl|position"): compaction keeps
// the latest one.
func PositionKey() []byte { return ControlKey("", KindPosition) }

// IsControlKey reports whether key is the key of a control record.
func IsControlKey(key []byte) bool {
	return len(key) > len(ControlPrefix) && string(key[:len(ControlPrefix)]) == ControlPrefix && key[len(ControlPrefix)] == '|'
}

// ParseControlKey returns the view and kind of a control key.
func ParseControlKey(key []byte) (view string, kind Kind, err error) {
	v, parts, err := DecodeKey(key)
	if err != nil {
		return "", "", err
	}
	if v == ControlPrefix && len(parts) == 1 && parts[0] == "position" {
		return "", KindPosition, nil
	}
	if v != ControlPrefix || len(parts) != 2 || !ValidViewName(parts[0]) {
		return "", "", fmt.Errorf("%w: %q is not a control key", ErrBadKey, key)
	}
	switch parts[1] {
	case "begin":
		return parts[0], KindEpochBegin, nil
	case "end":
		return parts[0], KindEpochEnd, nil
	case "poll":
		return parts[0], KindPoll, nil
	}
	return "", "", fmt.Errorf("%w: unknown control key suffix %q", ErrBadKey, parts[1])
}
