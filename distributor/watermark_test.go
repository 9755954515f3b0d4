package distributor

import (
	"context"
	"log/slog"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/IBM/sarama"

	"github.com/statecast/statecast/kafkaconn"
	"github.com/statecast/statecast/schemas/record"
	"github.com/statecast/statecast/schemas/record/recordsarama"
)

// The watermark never passes the database clock of the read that took it (docs/operations.md,
// Polling), against the real PostgreSQL and Kafka.

// TestWatermarkBeyondClock: a row whose incremental value is beyond the database clock
// ('infinity', a future time or date, numeric NaN or Infinity) is published, but the
// watermark does not move to it: a later ordinary change is still polled. The row is counted
// (once, though every poll re-reads it) and logged with its view and key.
func TestWatermarkBeyondClock(t *testing.T) {
	for _, tc := range []struct {
		name, typ, seed, bad, next string
	}{
		{"timestamptz infinity", "timestamptz", "clock_timestamp() - interval '1 hour'", "'infinity'", "clock_timestamp()"},
		{"timestamptz future", "timestamptz", "clock_timestamp() - interval '1 hour'", "clock_timestamp() + interval '1 day'", "clock_timestamp()"},
		{"timestamp future", "timestamp", "localtimestamp - interval '1 hour'", "localtimestamp + interval '1 day'", "clock_timestamp()::timestamp"},
		{"date infinity", "date", "current_date - 1", "'infinity'", "current_date"},
		{"date future", "date", "current_date - 1", "current_date + 2", "current_date"},
		{"numeric NaN", "numeric", "1", "'NaN'", "2"},
		{"numeric Infinity", "numeric", "1", "'Infinity'", "2"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t)
			e.exec(`CREATE TABLE w (id int PRIMARY KEY, name text NOT NULL, ver ` + tc.typ + `)`)
			e.exec(`INSERT INTO w VALUES (1, 'seed', ` + tc.seed + `)`)
			tap := &logTap{}
			r, reg := startReg(t, e.config(wView()), slog.New(tap))
			r.waitReady(t)
			seedWM := watermarks(t, readAll(t, e.brokers, e.topic), "w")
			if len(seedWM) != 1 || seedWM[0] == "" {
				t.Fatalf("start-up watermark %q", seedWM)
			}

			e.exec(`INSERT INTO w VALUES (100, 'bad', ` + tc.bad + `)`)
			recs := waitFor(t, e, "the row beyond the clock", func(recs []rec) bool { return rowsOf(recs, "w")["w|100"] != "" })
			// a few more polls, which all re-read the row
			n := polls(recs, "w")
			recs = waitFor(t, e, "more polls", func(recs []rec) bool { return polls(recs, "w") >= n+3 })
			for _, wm := range watermarks(t, recs, "w") {
				if wm != seedWM[0] {
					t.Fatalf("watermark moved from %q to %q (watermarks %q)", seedWM[0], wm, watermarks(t, recs, "w"))
				}
			}
			if c := slices.Index(kinds(recs, "w"), "row:w|100"); c < 0 || slices.Contains(kinds(recs, "w")[c+1:], "row:w|100") {
				t.Errorf("row 100 not published exactly once: %v", kinds(recs, "w"))
			}
			labels := map[string]string{"stream": e.topic, "view": "w"}
			if got := metricSum(t, reg, "statecast_distributor_incremental_beyond_total", labels); got != 1 {
				t.Errorf("statecast_distributor_incremental_beyond_total = %v, want 1", got)
			}
			if tap.count("incremental value beyond the database clock") != 1 || !tap.hasLine("incremental value beyond the database clock", "view=w", "w|100 = ") {
				t.Errorf("no single log line naming the key; log:\n%s", tap.text())
			}

			// an ordinary change after it is still polled, and moves the watermark
			e.exec(`INSERT INTO w VALUES (101, 'next', ` + tc.next + `)`)
			waitFor(t, e, "the next ordinary change", func(recs []rec) bool { return rowsOf(recs, "w")["w|101"] != "" })
			recs = waitFor(t, e, "the watermark to move", func(recs []rec) bool {
				wms := watermarks(t, recs, "w")
				return wms[len(wms)-1] != seedWM[0]
			})
			wms := watermarks(t, recs, "w")
			checkNotBeyond(t, wms[len(wms)-1])
		})
	}
}

// checkNotBeyond fails when wm is a value beyond the clock (independently of incBound).
func checkNotBeyond(t *testing.T, wm string) {
	t.Helper()
	if strings.Contains(strings.ToLower(wm), "inf") || wm == "NaN" {
		t.Fatalf("watermark %q", wm)
	}
	// a timestamp without time zone is a wall clock: up to 14 h ahead of UTC
	if ts, err := parseIncTime(wm); err == nil && ts.After(time.Now().Add(15*time.Hour)) {
		t.Fatalf("watermark %q is in the future", wm)
	}
}

// TestWatermarkSessionTimeZone: for timestamp without time zone and date, the clock is the
// database clock in the distributor session's TimeZone (PostgreSQL's own reading of a
// timestamp). The session here is 14 hours ahead of UTC: a value that is now on its wall
// clock moves the watermark, one an hour later is beyond it.
func TestWatermarkSessionTimeZone(t *testing.T) {
	e := newEnv(t)
	const zone = "Pacific/Kiritimati" // UTC+14
	e.exec(`CREATE TABLE z (id int PRIMARY KEY, ts timestamp, d date)`)
	e.exec(`INSERT INTO z VALUES (1, '2026-01-01', '2026-01-01')`)
	cfg := e.config(
		ViewConfig{Name: "ts", SQL: "SELECT id, ts FROM z", Key: []string{"id"}, ViewSettings: ViewSettings{Incremental: "ts", PollInterval: 50 * time.Millisecond}},
		ViewConfig{Name: "d", SQL: "SELECT id, d FROM z", Key: []string{"id"}, ViewSettings: ViewSettings{Incremental: "d", PollInterval: 50 * time.Millisecond}})
	cfg.Postgres.DSN += "&timezone=" + zone
	r, reg := startReg(t, cfg, slog.New(&logTap{}))
	r.waitReady(t)
	beyond := func(view string) float64 {
		return metricSum(t, reg, "statecast_distributor_incremental_beyond_total", map[string]string{"view": view})
	}

	var wall time.Time
	if err := e.db.QueryRow(context.Background(), `SELECT clock_timestamp() AT TIME ZONE '`+zone+`'`).Scan(&wall); err != nil {
		t.Fatal(err)
	}
	e.exec(`INSERT INTO z VALUES (2, clock_timestamp() AT TIME ZONE '` + zone + `', (clock_timestamp() AT TIME ZONE '` + zone + `')::date)`)
	recs := waitFor(t, e, "both watermarks at the zone's wall clock", func(recs []rec) bool {
		ts, d := watermarks(t, recs, "ts"), watermarks(t, recs, "d")
		return strings.HasPrefix(ts[len(ts)-1], wall.Format("2006-01-02T15")) && d[len(d)-1] == wall.Format(time.DateOnly)
	})
	if beyond("ts") != 0 || beyond("d") != 0 {
		t.Fatalf("the zone's current wall clock counted as beyond the clock: ts %v, d %v\n%s", beyond("ts"), beyond("d"), dump(recs))
	}

	e.exec(`INSERT INTO z VALUES (3, clock_timestamp() AT TIME ZONE '` + zone + `' + interval '1 hour', (clock_timestamp() AT TIME ZONE '` + zone + `')::date + 1)`)
	waitFor(t, e, "row 3", func(recs []rec) bool { return rowsOf(recs, "ts")["ts|3"] != "" && rowsOf(recs, "d")["d|3"] != "" })
	waitCond(t, "row 3 counted beyond the clock in both views", func() bool { return beyond("ts") == 1 && beyond("d") == 1 })
}

// TestWatermarkRestoredBeyondClock: a topic written by an older version holds a stuck
// watermark ('infinity', a future time, NaN). The restarted distributor drops it at its
// start-up epoch (logged), takes the epoch's own maximum, and polls the next change.
func TestWatermarkRestoredBeyondClock(t *testing.T) {
	for _, tc := range []struct{ typ, seed, stuck, next string }{
		{"timestamptz", "clock_timestamp() - interval '1 hour'", "infinity", "clock_timestamp()"},
		{"timestamptz", "clock_timestamp() - interval '1 hour'", "2999-01-01T00:00:00Z", "clock_timestamp()"},
		{"numeric", "1", "NaN", "2"},
	} {
		t.Run(tc.typ+" "+tc.stuck, func(t *testing.T) {
			e := newEnv(t)
			e.exec(`CREATE TABLE w (id int PRIMARY KEY, name text NOT NULL, ver ` + tc.typ + `)`)
			e.exec(`INSERT INTO w VALUES (1, 'seed', ` + tc.seed + `)`)
			cfg := e.config(wView())
			r1 := start(t, cfg)
			r1.waitReady(t)
			r1.stop(t)
			recs := readAll(t, e.brokers, e.topic)
			seedWM := watermarks(t, recs, "w")[0]
			stuckPoll(t, e, "w", lastPoll(recs, "w").meta.Epoch, tc.stuck)

			tap := &logTap{}
			r2, _ := startReg(t, cfg, slog.New(tap))
			r2.waitReady(t)
			recs = readAll(t, e.brokers, e.topic)
			wms := watermarks(t, recs, "w")
			if wms[len(wms)-2] != tc.stuck || wms[len(wms)-1] != seedWM {
				t.Fatalf("watermarks %q: want the stuck %q replaced by the epoch's %q", wms, tc.stuck, seedWM)
			}
			if !tap.hasLine("watermark beyond the database clock dropped", "view=w", "watermark="+tc.stuck) {
				t.Errorf("the dropped watermark is not logged:\n%s", tap.text())
			}
			e.exec(`INSERT INTO w VALUES (2, 'next', ` + tc.next + `)`)
			waitFor(t, e, "the next change polled", func(recs []rec) bool { return rowsOf(recs, "w")["w|2"] != "" })
		})
	}
}

// stuckPoll appends a poll record with watermark wm for view, as an older version wrote it.
func stuckPoll(t *testing.T, e *env, view string, epoch uint64, wm string) {
	t.Helper()
	p, err := sarama.NewSyncProducer(e.brokers, kafkaconn.NewConfig("test-stuck"))
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	now := time.Now()
	meta := record.Meta{View: view, Kind: record.KindPoll, Epoch: epoch, SourceTime: now}
	if _, _, err := p.SendMessage(&sarama.ProducerMessage{Topic: e.topic,
		Key:     sarama.ByteEncoder(record.ControlKey(view, record.KindPoll)),
		Value:   sarama.ByteEncoder((&record.Poll{Watermark: wm, SourceTime: now}).Marshal()),
		Headers: recordsarama.Headers(meta)}); err != nil {
		t.Fatal(err)
	}
}
