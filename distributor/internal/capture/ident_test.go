package capture

import (
	"errors"
	"strings"
	"testing"
)

// TestIdentifierRules: slot names follow PostgreSQL's rule for slots; a publication name
// may be any identifier of at most 63 bytes except what could leave one of its quotings
// (quotes, backslash, control characters) or is not UTF-8.
func TestIdentifierRules(t *testing.T) {
	for _, tc := range []struct {
		name string
		slot bool
		ok   bool
	}{
		{"statecast_shop", true, true},
		{strings.Repeat("s", 63), true, true},
		{strings.Repeat("s", 64), true, false},
		{"", true, false},
		{"Upper", true, false},
		{"a'b", true, false},
		{"a b", true, false},
		{"pub", false, true},
		{"Shop Pub, Two", false, true},
		{"café", false, true},
		{strings.Repeat("p", 63), false, true},
		{strings.Repeat("p", 64), false, false},
		{strings.Repeat("é", 32), false, false}, // 64 bytes
		{"", false, false},
		{"a'b", false, false},
		{`a"b`, false, false},
		{`a\b`, false, false},
		{"a\nb", false, false},
		{"a\x00b", false, false},
		{"a\u0085b", false, false}, // a C1 control: NEL
		{"a\xffb", false, false},
	} {
		check := CheckPublicationName
		if tc.slot {
			check = CheckSlotName
		}
		err := check(tc.name)
		if (err == nil) != tc.ok || err != nil && !errors.Is(err, ErrIdentifier) {
			t.Errorf("slot=%v %q: %v, want ok=%v", tc.slot, tc.name, err, tc.ok)
		}
	}
}

// TestPluginArgsQuoting: the publication is given to pgoutput double-quoted inside the
// option's single-quoted literal, as quote_literal(quote_ident(name)) would, and a name
// that could leave either quoting is refused before any command is built.
func TestPluginArgsQuoting(t *testing.T) {
	args, err := pluginArgs("Shop Pub, Two")
	if err != nil {
		t.Fatal(err)
	}
	if want := `publication_names '"Shop Pub, Two"'`; args[2] != want {
		t.Errorf("option %s, want %s", args[2], want)
	}
	for _, bad := range []string{"x', binary 'false", `x"`, `x\`, "x\ny"} {
		if args, err := pluginArgs(bad); err == nil {
			t.Errorf("%q: options %q, want a refusal", bad, args)
		}
	}
	if got := replLiteral("it's"); got != "'it''s'" {
		t.Errorf("replLiteral: %s", got)
	}
}

// FuzzPluginArgs: whatever the name, the options are refused or are exactly the four
// options (protocol 2, streaming, the publication, binary), the publication's a literal whose content, unquoted as the replication
// grammar reads it, is the name double-quoted.
func FuzzPluginArgs(f *testing.F) {
	for _, s := range []string{"pub", "Shop Pub, Two", "x', binary 'false", "a\"b", "", "é"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, name string) {
		args, err := pluginArgs(name)
		if err != nil {
			return
		}
		if len(args) != 4 || args[0] != "proto_version '2'" || args[1] != "streaming 'on'" || args[3] != "binary 'true'" {
			t.Fatalf("%q: options %q", name, args)
		}
		lit, ok := strings.CutPrefix(args[2], "publication_names '")
		if !ok || !strings.HasSuffix(lit, "'") {
			t.Fatalf("%q: option %s", name, args[2])
		}
		lit = lit[:len(lit)-1]
		if strings.Contains(strings.ReplaceAll(lit, "''", ""), "'") {
			t.Fatalf("%q: a lone quote in the literal %s", name, args[2])
		}
		if got := strings.ReplaceAll(lit, "''", "'"); got != `"`+strings.ReplaceAll(name, `"`, `""`)+`"` {
			t.Fatalf("%q: literal holds %s", name, got)
		}
	})
}

// TestReceiverQuotedPublication: a publication whose name needs quoting (upper case, a
// space, a comma) is the one streamed: pgoutput reads publication_names as a list of
// identifiers, where the unquoted name would be folded and split.
func TestReceiverQuotedPublication(t *testing.T) {
	ctx, conn, dsn := openDB(t)
	s := startStream(ctx, t, conn, dsn)
	const pub = "Shop Pub, Two"
	if err := EnsurePublication(ctx, conn, pub, s.deps.Tables, true); err != nil {
		t.Fatal(err)
	}
	mustExec(ctx, t, conn, `DROP PUBLICATION pub_test`) // only the quoted one can serve the stream
	s.recv = NewReceiver(s.recv.conn, ReceiverConfig{Slot: s.slot, Publication: pub, Start: s.at, Tables: s.recv.cfg.Tables})
	s.sub = s.recv.Subscribe([]uint32{s.sport, s.comp})
	s.run(ctx, t)
	mustExec(ctx, t, conn, "INSERT INTO sports VALUES (1, 'Football')")
	var after string
	if err := conn.QueryRow(ctx, "SELECT pg_current_wal_insert_lsn()::text").Scan(&after); err != nil {
		t.Fatal(err)
	}
	at, _ := ParseLSN(after)
	txns, _, err := s.sub.Take(ctx, at)
	if err != nil {
		t.Fatal(err)
	}
	if got := s.summary(txns); got != "sports I new=1" {
		t.Fatalf("changes %q, want the insert", got)
	}
}
