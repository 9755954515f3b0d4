package capture

import (
	"errors"
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/jackc/pgx/v5"
)

// MaxIdentifierLen is the longest name PostgreSQL keeps (NAMEDATALEN - 1 bytes). The
// server truncates a longer identifier with a mere NOTICE, so a configured name past it
// would name another object than the one the configuration shows: it is refused instead.
const MaxIdentifierLen = 63

// ErrIdentifier reports a slot or publication name that statecast refuses.
var ErrIdentifier = errors.New("capture: bad identifier")

// CheckSlotName applies PostgreSQL's own rule for replication slot names
// (ReplicationSlotValidateName): 1 to 63 lower-case letters, digits or _.
func CheckSlotName(name string) error {
	if name == "" || len(name) > MaxIdentifierLen {
		return fmt.Errorf("%w: slot name %q must be 1 to %d bytes", ErrIdentifier, name, MaxIdentifierLen)
	}
	for i := 0; i < len(name); i++ {
		if c := name[i]; !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '_') {
			return fmt.Errorf("%w: slot name %q may hold only lower-case letters, digits and _ (PostgreSQL's rule for slots)", ErrIdentifier, name)
		}
	}
	return nil
}

// CheckPublicationName checks a publication name. PostgreSQL takes any identifier of at
// most 63 bytes once it is double-quoted; the name here goes through two quotings (the
// identifier's, inside START_REPLICATION's single-quoted option value) and into logs, so
// what could end either quoting or forge a log line is refused although a quoted
// identifier could hold it: quotes of both kinds, a backslash, control characters
// (newline included), and bytes that are not UTF-8. Upper case, spaces and commas are kept:
// the name is quoted wherever it is used, so it names exactly the publication it spells.
func CheckPublicationName(name string) error {
	if name == "" || len(name) > MaxIdentifierLen {
		return fmt.Errorf("%w: publication name %q must be 1 to %d bytes (PostgreSQL's NAMEDATALEN-1), it has %d", ErrIdentifier, name, MaxIdentifierLen, len(name))
	}
	if !utf8.ValidString(name) {
		return fmt.Errorf("%w: publication name %q is not UTF-8", ErrIdentifier, name)
	}
	if i := strings.IndexFunc(name, func(r rune) bool {
		return r == '\'' || r == '"' || r == '\\' || unicode.IsControl(r) || r == utf8.RuneError
	}); i >= 0 {
		return fmt.Errorf("%w: publication name %q holds %q: quotes, backslashes and control characters are refused", ErrIdentifier, name, []rune(name[i:])[0])
	}
	return nil
}

// replLiteral quotes s as a string literal of the replication protocol's grammar
// (repl_scanner.l): between single quotes, a quote doubled. That grammar knows no E-prefixed
// strings, so a backslash is taken as it is, unlike quote_literal's E'…' form; the names
// quoted here hold none (CheckPublicationName).
func replLiteral(s string) string {
	return "'" + strings.ReplaceAll(s, "'", "''") + "'"
}

// pluginArgs are pgoutput's START_REPLICATION options for publication: protocol 2 with
// streaming, binary values. pgoutput splits
// publication_names as a list of identifiers (SplitIdentifierString): an unquoted name
// there is folded to lower case and cut at a comma or a space, so the name is given
// double-quoted (pgx.Identifier, as quote_ident would) inside the option's literal.
func pluginArgs(publication string) ([]string, error) {
	if err := CheckPublicationName(publication); err != nil {
		return nil, err
	}
	return []string{"proto_version '2'", "streaming 'on'", "publication_names " + replLiteral(pgx.Identifier{publication}.Sanitize()), "binary 'true'"}, nil
}
