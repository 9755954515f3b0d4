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
	"slices"
	"strings"
	"sync/atomic"
)

// Tokens says where a daemon reads its bearer tokens: a file, an environment variable, or
// both (their tokens are merged). Each holds entries `name=token`, one a line (the
// variable may also separate them with commas); `#` starts a comment line. The name is the
// principal the token authenticates; a token given as `sha256:<64 hex digits>` is the
// SHA-256 of the token, so that the file need not hold the token itself. A token given as
// itself has at least MinTokenLen characters. One name may have several tokens (the old
// and the new one during a rotation). The file is read again when it changes (Watch); the
// variable only at start.
type Tokens struct {
	File string `yaml:"file"`
	Env  string `yaml:"env"`
}

// MinTokenLen is the shortest token a tokens file or variable may hold: 16 random
// characters of a base64 or hex alphabet are 64 to 96 bits, out of reach of guessing at the
// rate a player lets one client try (a failure costs a delay and the connection). A
// `sha256:` entry cannot be checked: the tool that made it must have used a long token.
const MinTokenLen = 16

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
	// err is why the file was refused (nil: it loaded). The entries are then what was kept
	// of the previous table: see Reload.
	err error
}

// TokenSet is a loaded set of tokens, kept only as SHA-256 hashes. Lookup is safe for
// concurrent use with Reload.
type TokenSet struct {
	cfg   Tokens
	field string // the config field, in errors
	env   []tokenEntry
	cur   atomic.Pointer[tokenTable]
}

// LoadTokens reads the tokens t names. field is the configuration field (admin.tokens),
// named in errors. Errors never contain a token: a malformed line is named by its number.
// At start nothing is kept from anywhere: a file or a variable that does not load, or
// that holds no token, is an error.
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

// table builds the lookup table of a file's content b (with the variable's tokens). On an
// error it still returns the table of the well-formed entries (a token given to two names
// dropped from both), for Reload to keep what it may of them.
func (s *TokenSet) table(b []byte) (*tokenTable, error) {
	es, err := parseTokens(string(b))
	all := append(append([]tokenEntry(nil), s.env...), es...)
	seen := map[[sha256.Size]byte]string{}
	var shared map[[sha256.Size]byte]bool
	for _, e := range all {
		if other, dup := seen[e.hash]; dup && other != e.name {
			if shared == nil {
				shared = map[[sha256.Size]byte]bool{}
				err = errors.Join(err, fmt.Errorf("one token is given to both %q and %q", other, e.name))
			}
			shared[e.hash] = true
		}
		seen[e.hash] = e.name
	}
	if shared != nil {
		all = slices.DeleteFunc(all, func(e tokenEntry) bool { return shared[e.hash] })
	}
	return &tokenTable{entries: all, sum: sha256.Sum256(b)}, err
}

// parseTokens returns the entries of text's well-formed lines and, when some are not, the
// errors naming them by number (never their content, which may hold a token).
func parseTokens(text string) ([]tokenEntry, error) {
	var out []tokenEntry
	var errs []error
	for i, line := range strings.Split(text, "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		name, tok, ok := strings.Cut(line, "=")
		name, tok = strings.TrimSpace(name), strings.TrimSpace(tok)
		h, isHash := strings.CutPrefix(tok, "sha256:")
		switch {
		case !ok:
			errs = append(errs, fmt.Errorf("entry %d: want name=token", i+1))
			continue
		case !tokenName.MatchString(name):
			errs = append(errs, fmt.Errorf("entry %d: name %q: letters, digits and . _ @ : / + - only", i+1, name))
			continue
		case tok == "":
			errs = append(errs, fmt.Errorf("entry %d (%s): empty token", i+1, name))
			continue
		case !isHash && len(tok) < MinTokenLen:
			errs = append(errs, fmt.Errorf("entry %d (%s): a token of %d characters: at least %d", i+1, name, len(tok), MinTokenLen))
			continue
		}
		e := tokenEntry{name: name}
		if isHash {
			b, err := hex.DecodeString(h)
			if err != nil || len(b) != sha256.Size {
				errs = append(errs, fmt.Errorf("entry %d (%s): sha256: needs 64 hex digits", i+1, name))
				continue
			}
			copy(e.hash[:], b)
		} else {
			e.hash = sha256.Sum256([]byte(tok))
		}
		out = append(out, e)
	}
	return out, errors.Join(errs...)
}

// Lookup returns the name of token, or false. It compares the token's hash with every
// entry in constant time per entry and never stops early, so its time tells nothing about
// which entry, or which prefix, matched.
func (s *TokenSet) Lookup(token string) (name string, ok bool) {
	if token == "" {
		return "", false
	}
	return s.LookupHash(sha256.Sum256([]byte(token)))
}

// LookupHash is Lookup of a token's SHA-256: a caller that must check a token again later
// (whether it was revoked meanwhile) keeps its hash, not the token.
func (s *TokenSet) LookupHash(h [sha256.Size]byte) (name string, ok bool) {
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

// Err is why the file was refused at the last read that changed anything (the tokens kept
// are then those Reload says), or nil while it loads. It names lines by number, never their
// content.
func (s *TokenSet) Err() error { return s.cur.Load().err }

// Reload reads the file again and, when its content changed, replaces the set. It fails
// closed, so that a token removed from the file is refused from then on whatever else is
// wrong with the file:
//
//   - a file that loads replaces the set (an emptied file, or one of comments only, leaves
//     no token of the file: every one is refused);
//   - a file that cannot be read (deleted, unreadable) revokes every token of the file;
//   - a file with a malformed line keeps only the tokens that were valid and are still on
//     its well-formed lines under the same name, and adds none: a half-edited file neither
//     keeps a token its editor removed nor lets in one that was never checked.
//
// The variable's tokens stay in every case (it is read only at start). A refused file is
// returned as the error once per content and stays in Err until a good one replaces it.
func (s *TokenSet) Reload() (changed bool, err error) {
	if s.cfg.File == "" {
		return false, nil
	}
	cur := s.cur.Load()
	b, rerr := os.ReadFile(s.cfg.File)
	if rerr != nil {
		err := fmt.Errorf("%s.file: %w: every token of the file is revoked", s.field, rerr)
		if cur.err != nil && cur.err.Error() == err.Error() {
			return false, nil
		}
		s.cur.Store(&tokenTable{entries: s.env, err: err})
		return true, err
	}
	sum := sha256.Sum256(b)
	if sum == cur.sum { // a table made after a failed read has no sum: never equal
		return false, nil
	}
	tab, perr := s.table(b)
	if perr != nil {
		perr = fmt.Errorf("%s.file: %s: %w; keeping only the valid tokens still on its well-formed lines, adding none", s.field, s.cfg.File, perr)
		keep := map[tokenEntry]bool{}
		for _, e := range tab.entries {
			keep[e] = true
		}
		tab.entries = slices.DeleteFunc(slices.Clone(cur.entries), func(e tokenEntry) bool { return !keep[e] })
		tab.err = perr
	}
	s.cur.Store(tab)
	return !slices.Equal(tab.entries, cur.entries) || cur.err != nil && perr == nil, perr
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
