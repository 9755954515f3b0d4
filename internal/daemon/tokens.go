package daemon

import (
	"bytes"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"regexp"
	"strings"
	"sync/atomic"
)

// Tokens says where a daemon reads its bearer tokens: a file, an environment variable, or
// both (their tokens are merged). Each holds entries `name=token`, one a line (the
// variable may also separate them with commas); `#` starts a comment line. The name is the
// principal the token authenticates; a token given as `sha256:<64 hex digits>` is the
// SHA-256 of the token, so that the file need not hold the token itself. One name may have
// several tokens (the old and the new one during a rotation). The file is read again when
// it changes (Watch); the variable only at start.
type Tokens struct {
	File string `yaml:"file"`
	Env  string `yaml:"env"`
}

// Enabled reports whether tokens are configured.
func (t Tokens) Enabled() bool { return t.File != "" || t.Env != "" }

// tokenName is what a token's name may hold: it becomes a principal in logs and rules.
var tokenName = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._@:/+-]*$`)

type tokenEntry struct {
	name string
	hash [sha256.Size]byte
}

type tokenTable struct {
	entries []tokenEntry
	sum     [sha256.Size]byte // of the file's content: Reload skips an unchanged file
}

// TokenSet is a loaded set of tokens, kept only as SHA-256 hashes. Lookup is safe for
// concurrent use with Reload.
type TokenSet struct {
	cfg   Tokens
	field string // the config field, in errors
	env   []tokenEntry
	cur   atomic.Pointer[tokenTable]
	bad   [sha256.Size]byte // the content of the last file that failed to load (logged once)
}

// LoadTokens reads the tokens t names. field is the configuration field (admin.tokens),
// named in errors. Errors never contain a token: a malformed line is named by its number.
func LoadTokens(t Tokens, field string) (*TokenSet, error) {
	s := &TokenSet{cfg: t, field: field}
	if t.Env != "" {
		v, ok := os.LookupEnv(t.Env)
		if !ok {
			return nil, fmt.Errorf("%s.env: environment variable %s is not set", field, t.Env)
		}
		es, err := parseTokens(strings.ReplaceAll(v, ",", "\n"))
		if err != nil {
			return nil, fmt.Errorf("%s.env: %s: %w", field, t.Env, err)
		}
		s.env = es
	}
	tab := &tokenTable{}
	if t.File != "" {
		b, err := os.ReadFile(t.File)
		if err != nil {
			return nil, fmt.Errorf("%s.file: %w", field, err)
		}
		if tab, err = s.table(b); err != nil {
			return nil, fmt.Errorf("%s.file: %s: %w", field, t.File, err)
		}
	} else {
		tab.entries = s.env
	}
	if len(tab.entries) == 0 {
		return nil, fmt.Errorf("%s: no token configured", field)
	}
	s.cur.Store(tab)
	return s, nil
}

// table builds the lookup table of a file's content b (with the variable's tokens).
func (s *TokenSet) table(b []byte) (*tokenTable, error) {
	es, err := parseTokens(string(b))
	if err != nil {
		return nil, err
	}
	all := append(append([]tokenEntry(nil), s.env...), es...)
	seen := map[[sha256.Size]byte]string{}
	for _, e := range all {
		if other, dup := seen[e.hash]; dup && other != e.name {
			return nil, fmt.Errorf("one token is given to both %q and %q", other, e.name)
		}
		seen[e.hash] = e.name
	}
	return &tokenTable{entries: all, sum: sha256.Sum256(b)}, nil
}

func parseTokens(text string) ([]tokenEntry, error) {
	var out []tokenEntry
	for i, line := range strings.Split(text, "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		name, tok, ok := strings.Cut(line, "=")
		name, tok = strings.TrimSpace(name), strings.TrimSpace(tok)
		switch {
		case !ok:
			return nil, fmt.Errorf("entry %d: want name=token", i+1)
		case !tokenName.MatchString(name):
			return nil, fmt.Errorf("entry %d: name %q: letters, digits and . _ @ : / + - only", i+1, name)
		case tok == "":
			return nil, fmt.Errorf("entry %d (%s): empty token", i+1, name)
		}
		e := tokenEntry{name: name}
		if h, isHash := strings.CutPrefix(tok, "sha256:"); isHash {
			b, err := hex.DecodeString(h)
			if err != nil || len(b) != sha256.Size {
				return nil, fmt.Errorf("entry %d (%s): sha256: needs 64 hex digits", i+1, name)
			}
			copy(e.hash[:], b)
		} else {
			e.hash = sha256.Sum256([]byte(tok))
		}
		out = append(out, e)
	}
	return out, nil
}

// Lookup returns the name of token, or false. It compares the token's hash with every
// entry in constant time per entry and never stops early, so its time tells nothing about
// which entry, or which prefix, matched.
func (s *TokenSet) Lookup(token string) (name string, ok bool) {
	if token == "" {
		return "", false
	}
	h := sha256.Sum256([]byte(token))
	found := -1
	tab := s.cur.Load()
	for i := range tab.entries {
		if subtle.ConstantTimeCompare(h[:], tab.entries[i].hash[:]) == 1 {
			found = i
		}
	}
	if found < 0 {
		return "", false
	}
	return tab.entries[found].name, true
}

// Len is the number of tokens loaded.
func (s *TokenSet) Len() int { return len(s.cur.Load().entries) }

// Name is the set's configuration field (what Watch logs).
func (s *TokenSet) Name() string { return s.field }

// Reload reads the file again and, when its content changed and loads, replaces the set
// (a removed token is refused from then on). A file that fails to load leaves the set as
// it was; its error is returned once per content.
func (s *TokenSet) Reload() (changed bool, err error) {
	if s.cfg.File == "" {
		return false, nil
	}
	b, err := os.ReadFile(s.cfg.File)
	if err != nil {
		return false, fmt.Errorf("%s.file: %w", s.field, err)
	}
	sum := sha256.Sum256(b)
	if sum == s.cur.Load().sum || sum == s.bad {
		return false, nil
	}
	tab, err := s.table(b)
	if err == nil && len(tab.entries) == 0 {
		err = errors.New("no token left: keeping the previous tokens")
	}
	if err != nil {
		s.bad = sum
		return false, fmt.Errorf("%s.file: %s: %w", s.field, s.cfg.File, err)
	}
	s.cur.Store(tab)
	return true, nil
}

// BearerToken returns the token of an "Authorization: Bearer <token>" header value, or "".
func BearerToken(header string) string {
	scheme, tok, ok := strings.Cut(header, " ")
	if !ok || !strings.EqualFold(scheme, "bearer") {
		return ""
	}
	return strings.TrimSpace(tok)
}

// HashToken returns the `sha256:<hex>` form of a token, for a tokens file that should not
// hold the token itself.
func HashToken(token string) string {
	h := sha256.Sum256([]byte(token))
	var b bytes.Buffer
	b.WriteString("sha256:")
	b.WriteString(hex.EncodeToString(h[:]))
	return b.String()
}
