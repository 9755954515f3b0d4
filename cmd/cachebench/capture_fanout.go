package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	gojson "github.com/goccy/go-json"

	"github.com/statecast/statecast/cacheclient"
	"github.com/statecast/statecast/cmd/internal/bench"
	"github.com/statecast/statecast/distributor"
)

const fanoutSchema = `
CREATE TABLE competitions (id int PRIMARY KEY, name text NOT NULL);
CREATE TABLE events (id bigint PRIMARY KEY, competition_id int NOT NULL REFERENCES competitions, name text NOT NULL);
CREATE TABLE markets (id bigint PRIMARY KEY, event_id bigint NOT NULL REFERENCES events, name text NOT NULL, price int NOT NULL);
CREATE INDEX ON events (competition_id);
CREATE INDEX ON markets (event_id);
`

// The fan-out view in two declarations. Mapped selects every table's key, so a change of
// competitions is mapped to the rows that hold its id; unmapped selects the events'
// competition_id instead of c.id, so the distributor cannot map a competitions change and
// re-reads the whole view.
const (
	fanoutMapped = `SELECT m.id, m.name, m.price, e.id AS event_id, e.name AS event, c.id AS competition_id, c.name AS competition
		FROM markets m JOIN events e ON e.id = m.event_id JOIN competitions c ON c.id = e.competition_id`
	fanoutUnmapped = `SELECT m.id, m.name, m.price, e.id AS event_id, e.name AS event, e.competition_id, c.name AS competition
		FROM markets m JOIN events e ON e.id = m.event_id JOIN competitions c ON c.id = e.competition_id`
	fanoutView = "event_markets"
)

// runCaptureFanout renames a competition that many event_markets rows depend on and
// measures until every one of them shows the new name in the cache, with the view
// declared so that the change is mapped to those rows, beside the same renames with the
// view declared so that it is not (the whole view re-read), in the same run.
func runCaptureFanout(ctx context.Context, args *bench.Args, w io.Writer) error {
	comps := args.Int("competitions", 10, "competitions")
	events := args.Int("events", 100, "events per competition")
	markets := args.Int("markets", 100, "markets per event (competition 1 has events x markets rows)")
	rounds := args.Int("rounds", 3, "measured renames per declaration (after one unmeasured)")
	pause := args.Duration("pause", time.Second, "pause between renames (above the distributor's reread_debounce, so no re-read waits for it)")
	o := captureFlags(args)
	env, err := bench.NewDistEnv(ctx, args, fanoutSchema)
	if err != nil {
		return err
	}
	defer env.Close()
	if *comps < 1 || *events < 1 || *markets < 1 || *rounds < 1 {
		return errors.New("-competitions, -events, -markets and -rounds must be at least 1")
	}
	for _, q := range []struct {
		sql  string
		args []any
	}{
		{"INSERT INTO competitions SELECT c, 'Competition ' || c FROM generate_series(1, $1::int) c", []any{*comps}},
		{"INSERT INTO events SELECT (c - 1) * $2::int + e, c, 'Event ' || c || '-' || e FROM generate_series(1, $1::int) c, generate_series(1, $2::int) e",
			[]any{*comps, *events}},
		{"INSERT INTO markets SELECT (ev.id - 1) * $1::int + m, ev.id, 'Market ' || m, m FROM events ev, generate_series(1, $1::int) m", []any{*markets}},
	} {
		if _, err := env.Conn.Exec(ctx, q.sql, q.args...); err != nil {
			return err
		}
	}
	if _, err := env.Conn.Exec(ctx, "VACUUM ANALYZE"); err != nil {
		return err
	}
	dependent := *events * *markets
	total := dependent * *comps
	// Competition 1's markets are ids 1..events*markets.
	keys := make([]string, dependent)
	for i := range keys {
		keys[i] = strconv.Itoa(i + 1)
	}

	fmt.Fprintf(w, "capture-fanout: %s = markets ⋈ events ⋈ competitions, %d rows (%d competitions x %d events x %d markets); each round renames competition 1, on which %d rows depend\n",
		fanoutView, total, *comps, *events, *markets, dependent)
	fmt.Fprintln(w, "path:", capturePath())
	fmt.Fprintf(w, "time = just before the rename's COMMIT was sent -> the first cacheclient Get after a publication in which all %d rows show the new name\n", dependent)
	fmt.Fprintf(w, "each declaration runs its own distributor, player and cache in turn; one unmeasured rename, then %d measured, %v apart (reread_debounce %v)\n\n",
		*rounds, *pause, distributor.DefaultRereadDebounce)

	version := 0
	var results [2][]time.Duration
	for i, decl := range []struct{ name, sql string }{
		{"mapped (the view selects every table's key)", fanoutMapped},
		{"baseline: competitions unmapped (the view selects e.competition_id, not c.id): the whole view re-read", fanoutUnmapped},
	} {
		fmt.Fprintln(w, decl.name)
		ds, err := fanoutRounds(ctx, w, env, o, decl.sql, keys, *rounds, *pause, &version)
		if err != nil {
			return err
		}
		results[i] = ds
		fmt.Fprintln(w)
	}
	mapped, full := bench.Summarize(results[0]), bench.Summarize(results[1])
	fmt.Fprintf(w, "mapped: median %s ms, worst %s ms; whole view re-read: median %s ms, worst %s ms; mapped / re-read (medians) = %.2f\n",
		bench.MS(mapped.P50), bench.MS(mapped.Max), bench.MS(full.P50), bench.MS(full.Max), bench.Ratio(mapped.P50, full.P50))
	goalAtMost(w, fmt.Sprintf("rename visible in all %d rows, mapped, worst round", dependent), mapped.Max, time.Second)
	return nil
}

// fanoutRounds starts a pipeline with the view declared by sql and times the renames.
func fanoutRounds(ctx context.Context, w io.Writer, env *bench.DistEnv, o captureOpts, sql string, keys []string,
	rounds int, pause time.Duration, version *int) ([]time.Duration, error) {
	pipe, err := bench.StartPipeline(ctx, env, env.DSN, []distributor.ViewConfig{{Name: fanoutView, SQL: sql, Key: []string{"id"}}}, o.distOpts()...)
	if err != nil {
		return nil, err
	}
	defer pipe.Close()
	cache, err := bench.StartCache(ctx, pipe.Player.Addr(), pipe.Topic, map[string]cacheclient.Decoder[int64]{fanoutView: competitionVersion})
	if err != nil {
		return nil, err
	}
	defer cache.Close()
	for _, d := range pipe.Dependencies() {
		fmt.Fprintln(w, "  distributor:", d)
	}
	probe := cache.Probe(fanoutView)
	var out []time.Duration
	for r := 0; r <= rounds; r++ {
		*version++
		t := &bench.Txn{Rows: 1, Op: bench.OpUpdate, Version: int64(*version)}
		for _, k := range keys {
			probe.Expect(t, k, t.Version)
		}
		tx, err := env.Conn.Begin(ctx)
		if err != nil {
			return nil, err
		}
		if _, err := tx.Exec(ctx, "UPDATE competitions SET name = 'Competition 1 #' || $1::int WHERE id = 1", *version); err != nil {
			_ = tx.Rollback(ctx)
			return nil, err
		}
		t.Sent = time.Now()
		if err := tx.Commit(ctx); err != nil {
			return nil, err
		}
		if err := probe.Wait(ctx, *o.timeout); err != nil {
			return nil, err
		}
		d := t.Visible.Sub(t.Sent)
		if r == 0 {
			fmt.Fprintf(w, "  warm-up rename: %s ms\n", bench.MS(d))
		} else {
			fmt.Fprintf(w, "  round %d: %s ms\n", r, bench.MS(d))
			out = append(out, d)
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(pause):
		}
	}
	return out, nil
}

// competitionVersion decodes an event_markets row into the number of the rename its
// competition name shows ("Competition 1 #3": 3; never renamed: 0).
func competitionVersion(_ string, value []byte) (int64, error) {
	var row struct {
		Competition string `json:"competition"`
	}
	if err := gojson.Unmarshal(value, &row); err != nil {
		return 0, err
	}
	i := strings.LastIndexByte(row.Competition, '#')
	if i < 0 {
		return 0, nil
	}
	return strconv.ParseInt(row.Competition[i+1:], 10, 64)
}
