package distributor

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/IBM/sarama"
	"github.com/jackc/pgx/v5"

	"github.com/statecast/statecast/distributor/internal/capture"
	"github.com/statecast/statecast/kafkaconn"
)

// DatabaseCheck is what CheckDatabase found in PostgreSQL for a config.
type DatabaseCheck struct {
	Server   string // server_version
	User     string // current_user
	WALLevel string
	// Replication: the role may open a replication connection (REPLICATION or superuser).
	Replication bool
	// Problems of the database as a whole (wal_level, the role), each a sentence with its fix.
	Problems []string
	// Streams, in config order.
	Streams []StreamCheck
}

// StreamCheck is one stream's part of a DatabaseCheck.
type StreamCheck struct {
	Topic   string
	Capture string
	// Notes: wal streams: the slot and the publication as they are now.
	Notes    []string
	Problems []string
	Views    []ViewCheck
}

// ViewCheck is one view's part of a DatabaseCheck.
type ViewCheck struct {
	View string
	// Columns of the view's result: "name type", the key columns marked "(key)".
	Columns []string
	// Tables (wal views): each base table, its replica identity and how its changes reach
	// the view's rows.
	Tables   []string
	Problems []string
}

// OK reports whether c found no problem.
func (c *DatabaseCheck) OK() bool {
	if len(c.Problems) > 0 {
		return false
	}
	for _, s := range c.Streams {
		if len(s.Problems) > 0 {
			return false
		}
		for _, v := range s.Views {
			if len(v.Problems) > 0 {
				return false
			}
		}
	}
	return true
}

// CheckDatabase checks cfg against PostgreSQL (cfg's DSN), in transactions that it rolls
// back: each view's SQL is prepared and run with LIMIT 0 (permissions included),
// its key columns and column types are checked with the encoder Run uses, and for wal
// streams the capture prerequisites: wal_level=logical, a role that may replicate, each
// base table's replica identity, the publication's tables, the slot. It changes nothing.
// The error is for a config that does not validate or a database it cannot reach; what
// it finds wrong is in the result's Problems (OK).
func CheckDatabase(ctx context.Context, cfg Config) (*DatabaseCheck, error) {
	c := cfg.clone()
	if err := c.Validate(); err != nil {
		return nil, err
	}
	conn, err := pgx.Connect(ctx, c.Postgres.DSN)
	if err != nil {
		return nil, fmt.Errorf("distributor: postgres: %w", err)
	}
	defer func() { _ = conn.Close(context.WithoutCancel(ctx)) }()
	out := &DatabaseCheck{}
	if err := conn.QueryRow(ctx, `SELECT current_setting('server_version'), current_user, current_setting('wal_level'),
		rolreplication OR rolsuper FROM pg_roles WHERE rolname = current_user`).Scan(&out.Server, &out.User, &out.WALLevel, &out.Replication); err != nil {
		return nil, fmt.Errorf("distributor: postgres: %w", err)
	}
	wal := slices.ContainsFunc(c.Streams, func(s StreamConfig) bool { return s.Capture == CaptureWAL })
	if wal && out.WALLevel != "logical" {
		out.Problems = append(out.Problems, fmt.Sprintf("wal_level is %s: capture wal needs logical (ALTER SYSTEM SET wal_level = logical, then restart PostgreSQL; or capture: poll)", out.WALLevel))
	}
	if wal && !out.Replication {
		out.Problems = append(out.Problems, fmt.Sprintf("role %s may not replicate: capture wal needs it (ALTER ROLE %s REPLICATION; or capture: poll)", out.User, pgx.Identifier{out.User}.Sanitize()))
	}
	for i := range c.Streams {
		s := &c.Streams[i]
		sc := StreamCheck{Topic: s.Topic, Capture: s.Capture}
		var tables []*capture.Table
		for j := range s.Views {
			vc, ts := checkView(ctx, conn, s, &s.Views[j])
			sc.Views = append(sc.Views, vc)
			for _, t := range ts {
				if !slices.ContainsFunc(tables, func(o *capture.Table) bool { return o.OID == t.OID }) {
					tables = append(tables, t)
				}
			}
		}
		if s.Capture == CaptureWAL {
			checkPublication(ctx, conn, s, tables, &sc)
			checkSlot(ctx, conn, s, &sc)
		}
		out.Streams = append(out.Streams, sc)
	}
	return out, nil
}

// checkView runs one view's checks in a transaction of its own, rolled back (an error
// aborts a transaction; the next view starts clean). It is not READ ONLY: the analysis of
// a wal view defines a temporary view.
func checkView(ctx context.Context, conn *pgx.Conn, s *StreamConfig, v *ViewConfig) (ViewCheck, []*capture.Table) {
	vc := ViewCheck{View: v.Name}
	tx, err := conn.Begin(ctx)
	if err != nil {
		vc.Problems = append(vc.Problems, err.Error())
		return vc, nil
	}
	defer func() { _ = tx.Rollback(context.WithoutCancel(ctx)) }()
	// The SQL alone first, with the extended protocol: nothing that pastes it runs unless
	// it is one statement that parses (capture.CheckStatement).
	if err := capture.CheckStatement(ctx, conn.PgConn(), v.Name, v.SQL); err != nil {
		if !errors.Is(err, capture.ErrStatement) {
			err = sqlError(v, err)
		}
		vc.Problems = append(vc.Problems, err.Error())
		return vc, nil
	}
	query := "SELECT * FROM (" + v.SQL + ") AS statecast_check LIMIT 0"
	if _, err := compileEncoder(ctx, tx, v, query); err != nil {
		vc.Problems = append(vc.Problems, err.Error())
		return vc, nil
	}
	rows, err := tx.Query(ctx, query)
	if err != nil {
		vc.Problems = append(vc.Problems, fmt.Sprintf("running the SQL with LIMIT 0: %v", err))
		return vc, nil
	}
	fields := slices.Clone(rows.FieldDescriptions())
	rows.Close()
	if err := rows.Err(); err != nil {
		vc.Problems = append(vc.Problems, fmt.Sprintf("running the SQL with LIMIT 0: %v", err))
		return vc, nil
	}
	for _, f := range fields {
		typ := fmt.Sprintf("oid %d", f.DataTypeOID)
		_ = tx.QueryRow(ctx, "SELECT format_type($1, NULL)", f.DataTypeOID).Scan(&typ)
		col := f.Name + " " + typ
		if slices.Contains(v.Key, f.Name) {
			col += " (key)"
		}
		if f.Name == v.Incremental {
			col += " (incremental)"
		}
		vc.Columns = append(vc.Columns, col)
	}
	if s.Capture != CaptureWAL {
		return vc, nil
	}
	deps, err := capture.Analyze(ctx, tx, capture.ViewSpec{Name: v.Name, SQL: v.SQL, Key: v.Key, Tables: v.Tables, Depends: v.Depends})
	if err != nil {
		vc.Problems = append(vc.Problems, strings.TrimPrefix(err.Error(), capture.ErrAnalyze.Error()+": "))
		return vc, nil
	}
	for _, t := range deps.Tables {
		vc.Tables = append(vc.Tables, fmt.Sprintf("%s: replica identity %s", t, identityOf(t)))
	}
	vc.Tables = append(vc.Tables, deps.Describe()...)
	for _, t := range deps.NeedFull {
		if s.ReplicaIdentity == ReplicaIdentityKeep {
			vc.Tables = append(vc.Tables, fmt.Sprintf("%s: mapped once it has REPLICA IDENTITY FULL (replica_identity: keep leaves it: ALTER TABLE %s REPLICA IDENTITY FULL)", t, t.QualifiedName()))
			continue
		}
		vc.Tables = append(vc.Tables, fmt.Sprintf("%s: the distributor sets REPLICA IDENTITY FULL at start (replica_identity: full; its role must own the table), which maps it", t))
	}
	if len(deps.Unmapped) > 0 {
		vc.Tables = append(vc.Tables, "changes of a table re-read in full are read off the stream's path: the view follows the stream at the position of its last re-read (position records name it as behind), and the other views do not wait")
	}
	return vc, deps.Tables
}

func identityOf(t *capture.Table) string {
	names := make([]string, len(t.Identity))
	for i, c := range t.Identity {
		names[i] = c.Name
	}
	switch t.ReplIdent {
	case 'f':
		return "full"
	case 'i':
		return "index (" + strings.Join(names, ", ") + ")"
	default:
		return "default (" + strings.Join(names, ", ") + ")"
	}
}

// checkPublication says whether the stream's publication exists and publishes every base
// table: Run creates or completes a publication of its own, never one named in the config.
func checkPublication(ctx context.Context, conn *pgx.Conn, s *StreamConfig, tables []*capture.Table, sc *StreamCheck) {
	var all bool
	err := conn.QueryRow(ctx, "SELECT puballtables FROM pg_publication WHERE pubname = $1", s.Publication).Scan(&all)
	if errors.Is(err, pgx.ErrNoRows) {
		if s.managePublication {
			sc.Notes = append(sc.Notes, fmt.Sprintf("publication %s does not exist: the distributor creates it (its role must own the tables)", s.Publication))
		} else {
			sc.Problems = append(sc.Problems, fmt.Sprintf("publication %s does not exist (create it FOR TABLE the views' tables)", s.Publication))
		}
		return
	}
	if err != nil {
		sc.Problems = append(sc.Problems, fmt.Sprintf("publication %s: %v", s.Publication, err))
		return
	}
	if all {
		sc.Notes = append(sc.Notes, fmt.Sprintf("publication %s publishes all tables", s.Publication))
		return
	}
	var missing []string
	for _, t := range tables {
		var in bool
		if err := conn.QueryRow(ctx, "SELECT EXISTS (SELECT 1 FROM pg_publication_tables WHERE pubname = $1 AND schemaname = $2 AND tablename = $3)",
			s.Publication, t.Schema, t.Name).Scan(&in); err != nil {
			sc.Problems = append(sc.Problems, fmt.Sprintf("publication %s: %v", s.Publication, err))
			return
		}
		if !in {
			missing = append(missing, t.QualifiedName())
		}
	}
	switch {
	case len(missing) == 0:
		sc.Notes = append(sc.Notes, fmt.Sprintf("publication %s publishes every table of the views", s.Publication))
	case s.managePublication:
		sc.Notes = append(sc.Notes, fmt.Sprintf("publication %s lacks %s: the distributor adds them", s.Publication, strings.Join(missing, ", ")))
	default:
		sc.Problems = append(sc.Problems, fmt.Sprintf("publication %s lacks %s (ALTER PUBLICATION %s ADD TABLE %s)",
			s.Publication, strings.Join(missing, ", "), pgx.Identifier{s.Publication}.Sanitize(), strings.Join(missing, ", ")))
	}
}

// checkSlot says whether the stream's slot exists, its plugin, and how much WAL it holds.
func checkSlot(ctx context.Context, conn *pgx.Conn, s *StreamConfig, sc *StreamCheck) {
	var plugin string
	var active bool
	var retained *int64
	err := conn.QueryRow(ctx, `SELECT coalesce(plugin, ''), active, pg_wal_lsn_diff(pg_current_wal_lsn(), restart_lsn)::bigint
		FROM pg_replication_slots WHERE slot_name = $1`, s.Slot).Scan(&plugin, &active, &retained)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		sc.Notes = append(sc.Notes, fmt.Sprintf("slot %s does not exist: the distributor creates it", s.Slot))
	case err != nil:
		sc.Problems = append(sc.Problems, fmt.Sprintf("slot %s: %v", s.Slot, err))
	case plugin != "pgoutput":
		sc.Problems = append(sc.Problems, fmt.Sprintf("slot %s exists with plugin %q: the distributor needs pgoutput (drop it, or name another slot)", s.Slot, plugin))
	default:
		held := "unknown"
		if retained != nil {
			held = fmt.Sprintf("%d bytes", *retained)
		}
		sc.Notes = append(sc.Notes, fmt.Sprintf("slot %s exists (pgoutput, active %v, WAL held %s)", s.Slot, active, held))
	}
}

// Print writes what c found, one finding a line, problems marked FAIL (cachectl validate
// -connect, distributor -check).
func (c *DatabaseCheck) Print(w io.Writer) {
	fmt.Fprintf(w, "postgres: server %s, user %s, wal_level %s, replication %v\n", c.Server, c.User, c.WALLevel, c.Replication)
	for _, p := range c.Problems {
		fmt.Fprintf(w, "  FAIL %s\n", p)
	}
	for _, s := range c.Streams {
		fmt.Fprintf(w, "  stream %s (%s)\n", s.Topic, s.Capture)
		for _, n := range s.Notes {
			fmt.Fprintf(w, "    %s\n", n)
		}
		for _, p := range s.Problems {
			fmt.Fprintf(w, "    FAIL %s\n", p)
		}
		for _, v := range s.Views {
			state := "ok"
			if len(v.Problems) > 0 {
				state = "FAIL"
			}
			fmt.Fprintf(w, "    view %s: %s\n", v.View, state)
			if len(v.Columns) > 0 {
				fmt.Fprintf(w, "      columns: %s\n", strings.Join(v.Columns, ", "))
			}
			for _, t := range v.Tables {
				fmt.Fprintf(w, "      %s\n", t)
			}
			for _, p := range v.Problems {
				fmt.Fprintf(w, "      FAIL %s\n", p)
			}
		}
	}
}

// CheckKafka reaches cfg's Kafka and says, one line each on w, whether each stream's topic
// exists with one partition and cleanup.policy=compact (a missing topic is created by
// Run). It fails when Kafka cannot be reached or a topic is unusable. It changes nothing.
func CheckKafka(cfg Config, w io.Writer) error {
	c := cfg.clone()
	if err := c.Validate(); err != nil {
		return err
	}
	admin, err := sarama.NewClusterAdmin(c.Kafka.Brokers, c.Kafka.clientConfig("-check"))
	if err != nil {
		fmt.Fprintf(w, "kafka: FAIL %s: %v\n", strings.Join(c.Kafka.Brokers, ","), err)
		return fmt.Errorf("distributor: kafka: %w", err)
	}
	defer func() { _ = admin.Close() }()
	brokers, _, err := admin.DescribeCluster()
	if err != nil {
		fmt.Fprintf(w, "kafka: FAIL %s: %v\n", strings.Join(c.Kafka.Brokers, ","), err)
		return fmt.Errorf("distributor: kafka: %w", err)
	}
	fmt.Fprintf(w, "kafka: %s answers, %d broker(s)\n", strings.Join(c.Kafka.Brokers, ","), len(brokers))
	var bad []string
	for _, s := range c.Streams {
		metas, err := admin.DescribeTopics([]string{s.Topic})
		switch {
		case err != nil:
			bad = append(bad, s.Topic)
			fmt.Fprintf(w, "  topic %s: FAIL %v\n", s.Topic, err)
			continue
		case len(metas) == 1 && metas[0].Err == sarama.ErrUnknownTopicOrPartition:
			fmt.Fprintf(w, "  topic %s: does not exist: the distributor creates it (1 partition, compact)\n", s.Topic)
			continue
		case len(metas) != 1 || metas[0].Err != sarama.ErrNoError:
			bad = append(bad, s.Topic)
			fmt.Fprintf(w, "  topic %s: FAIL %v\n", s.Topic, metas)
			continue
		}
		policy := ""
		if entries, err := kafkaconn.TopicConfig(admin, s.Topic, "cleanup.policy"); err == nil {
			for _, e := range entries {
				if e.Name == "cleanup.policy" {
					policy = e.Value
				}
			}
		}
		n := len(metas[0].Partitions)
		if n != 1 || !strings.Contains(policy, "compact") {
			bad = append(bad, s.Topic)
			fmt.Fprintf(w, "  topic %s: FAIL %d partition(s), cleanup.policy=%s: a stream needs 1 partition and compact\n", s.Topic, n, policy)
			continue
		}
		fmt.Fprintf(w, "  topic %s: 1 partition, cleanup.policy=%s\n", s.Topic, policy)
	}
	if len(bad) > 0 {
		return fmt.Errorf("%w: unusable topic(s) %s", ErrTopic, strings.Join(bad, ", "))
	}
	return nil
}
