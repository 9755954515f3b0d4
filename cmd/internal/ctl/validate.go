package ctl

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/statecast/statecast/distributor"
)

// Validate loads a distributor config file with the distributor's own checks (unknown
// fields, ${ENV}, cron, view names and keys, Kafka client settings) and prints what it
// would publish. It does not connect to PostgreSQL or Kafka; SQL is checked at start-up,
// or by Analyze.
func Validate(w io.Writer, path string) error {
	cfg, err := distributor.LoadConfig(path)
	if err != nil {
		return err
	}
	views := 0
	for _, s := range cfg.Streams {
		views += len(s.Views)
	}
	fmt.Fprintf(w, "%s: ok — %d stream(s), %d view(s)\n", path, len(cfg.Streams), views)
	for _, s := range cfg.Streams {
		fmt.Fprintf(w, "  stream %s\n", s.Topic)
		if s.Capture == distributor.CaptureWAL {
			fmt.Fprintf(w, "  stream %s: capture wal, slot %s, publication %s\n", s.Topic, s.Slot, s.Publication)
		} else {
			fmt.Fprintf(w, "  stream %s: capture poll\n", s.Topic)
		}
		for _, v := range s.Views {
			how := "full only"
			switch {
			case s.Capture == distributor.CaptureWAL:
				how = "every change from the WAL"
			case v.Incremental != "":
				how = "incremental on " + v.Incremental
			}
			fmt.Fprintf(w, "    view %-20s key %v, %s\n", v.Name, v.Key, how)
		}
	}
	return nil
}

// Analyze is Validate plus, for the wal streams, what PostgreSQL says of each view (the
// config's DSN; nothing is changed): how each base table's changes reach its rows — by
// key, by a column, or by a full re-read of the view, with the reason — or why the view
// cannot be captured. It fails when a view cannot.
func Analyze(ctx context.Context, w io.Writer, path string) error {
	if err := Validate(w, path); err != nil {
		return err
	}
	cfg, err := distributor.LoadConfig(path)
	if err != nil {
		return err
	}
	deps, err := distributor.Dependencies(ctx, *cfg)
	if err != nil {
		return err
	}
	var bad []string
	for _, d := range deps {
		if d.Err != nil {
			fmt.Fprintf(w, "  view %s: CANNOT be captured: %v\n", d.View, d.Err)
			bad = append(bad, d.View)
			continue
		}
		fmt.Fprintf(w, "  view %s:\n", d.View)
		for _, t := range d.Tables {
			fmt.Fprintf(w, "    %s\n", t)
		}
	}
	if len(bad) > 0 {
		return fmt.Errorf("view(s) %s cannot be captured from the WAL", strings.Join(bad, ", "))
	}
	return nil
}

// Connect is Validate plus what PostgreSQL says of the config (distributor.CheckDatabase:
// each view's SQL run with LIMIT 0, its columns and key, and for wal streams wal_level,
// the role, each table's replica identity, the publication and the slot). It prints what
// it found, problems marked FAIL, and fails when there is one.
func Connect(ctx context.Context, w io.Writer, path string) error {
	if err := Validate(w, path); err != nil {
		return err
	}
	cfg, err := distributor.LoadConfig(path)
	if err != nil {
		return err
	}
	c, err := distributor.CheckDatabase(ctx, *cfg)
	if err != nil {
		return err
	}
	c.Print(w)
	if !c.OK() {
		return errors.New("the database does not meet the config (FAIL lines above)")
	}
	return nil
}
