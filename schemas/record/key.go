package record

import (
	"bytes"
	"fmt"
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
// The view name is not validated here; callers validate it once with ValidViewName.
func EncodeKey(view string, parts ...string) []byte {
	n := len(view) + len(parts)
	for _, p := range parts {
		n += len(p)
	}
	dst := make([]byte, 0, n+4)
	dst = AppendEscaped(dst, view)
	for _, p := range parts {
		dst = append(dst, '|')
		dst = AppendEscaped(dst, p)
	}
	return dst
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
	var cur []byte
	var fields []string
	escaped := false
	for i := 0; i < len(key); i++ {
		c := key[i]
		switch {
		case escaped:
			if c != '\\' && c != '|' {
				return "", nil, fmt.Errorf("%w: bad escape \\%c at byte %d", ErrBadKey, c, i)
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
		return "", nil, fmt.Errorf("%w: trailing backslash", ErrBadKey)
	}
	fields = append(fields, string(cur))
	if len(fields) < 2 {
		return "", nil, fmt.Errorf("%w: no key part in %q", ErrBadKey, key)
	}
	return fields[0], fields[1:], nil
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
// "!ctl|<view>|begin", "!ctl|<view>|end" or "!ctl|<view>|poll".
func ControlKey(view string, kind Kind) []byte {
	return EncodeKey(ControlPrefix, view, kind.controlSuffix())
}

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
