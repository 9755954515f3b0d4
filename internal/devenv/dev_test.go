package devenv

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/statecast/statecast/internal/testenv"
)

// TestDevDemo runs the whole demo (real PostgreSQL, embedded broker, the distributor) and
// checks that the stream shows the snapshot, the scripted changes and the tombstones.
func TestDevDemo(t *testing.T) {
	admin := testenv.PostgresDSN(t)
	name := testenv.UniqueName("demo")
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if c, err := pgx.Connect(ctx, admin); err == nil {
			_, _ = c.Exec(ctx, "DROP DATABASE IF EXISTS "+name+" WITH (FORCE)")
			_ = c.Close(ctx)
		}
	})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var out bytes.Buffer
	err := Dev(ctx, DevOptions{AdminDSN: admin, Database: name, Out: &out, Duration: 3 * time.Second, Step: 300 * time.Millisecond})
	if err != nil {
		t.Fatalf("Dev: %v\n%s", err, out.String())
	}
	s := out.String()
	for _, want := range []string{
		// snapshot epochs of every view
		`!ctl|sports|end  {"epoch":1,"rows":3,`,
		`!ctl|events|end  {"epoch":1,"rows":20,`,
		`!ctl|event_markets|end  {"epoch":1,"rows":60,`,
		`!ctl|selections|end  {"epoch":1,"rows":140,`,
		// incremental changes
		`selections|10001|100011  {"market_id":10001,"id":100011,"name":"Home","price":"2.150"`,
		`"competition":"Premier League 26/27"`,
		`events|1100  {"id":1100,`,
		// the delete, at the reconcile, in every view it touches
		`events|1004  <tombstone>`,
		`event_markets|1004|10041  <tombstone>`,
		`selections|10041|100411  <tombstone>`,
		"-- done",
	} {
		if !strings.Contains(s, want) {
			t.Errorf("output lacks %q", want)
		}
	}
	if t.Failed() {
		t.Log(s)
	}
}
