package demo

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
)

// Database is the database `cachectl dev` (re)creates on the local server.
const Database = "statecast_demo"

// Seed drops and re-creates database name on the server of adminDSN (with its
// replication slots, which would keep it from being dropped), loads the demo schema and
// seed rows into it, and returns the new database's DSN.
func Seed(ctx context.Context, adminDSN, name string) (string, error) {
	admin, err := pgx.Connect(ctx, adminDSN)
	if err != nil {
		return "", fmt.Errorf("demo: connect to PostgreSQL: %w", err)
	}
	defer admin.Close(context.Background())
	if err := DropSlots(ctx, admin, name); err != nil {
		return "", err
	}
	ident := pgx.Identifier{name}.Sanitize()
	if _, err := admin.Exec(ctx, "DROP DATABASE IF EXISTS "+ident+" WITH (FORCE)"); err != nil {
		return "", fmt.Errorf("demo: drop database %s: %w", name, err)
	}
	if _, err := admin.Exec(ctx, "CREATE DATABASE "+ident); err != nil {
		return "", fmt.Errorf("demo: create database %s: %w", name, err)
	}
	cfg := admin.Config().Copy()
	cfg.Database = name
	conn, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		return "", fmt.Errorf("demo: connect to %s: %w", name, err)
	}
	defer conn.Close(context.Background())
	if _, err := conn.Exec(ctx, Schema); err != nil {
		return "", fmt.Errorf("demo: load schema.sql: %w", err)
	}
	return DSN(adminDSN, name)
}

// DropSlots drops the replication slots of database db (a demo's distributor leaves one;
// it keeps the database from being dropped and PostgreSQL from recycling WAL), ending the
// connections that still stream from them first.
func DropSlots(ctx context.Context, conn *pgx.Conn, db string) error {
	for attempt := 0; ; attempt++ {
		var left int
		if _, err := conn.Exec(ctx, "SELECT pg_terminate_backend(active_pid) FROM pg_replication_slots WHERE database = $1 AND active_pid IS NOT NULL", db); err != nil {
			return fmt.Errorf("demo: replication slots of %s: %w", db, err)
		}
		// A slot whose connection has just ended may still be active: the next attempt drops it.
		_, _ = conn.Exec(ctx, "SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots WHERE database = $1 AND active_pid IS NULL", db)
		if err := conn.QueryRow(ctx, "SELECT count(*) FROM pg_replication_slots WHERE database = $1", db).Scan(&left); err != nil {
			return fmt.Errorf("demo: replication slots of %s: %w", db, err)
		}
		if left == 0 {
			return nil
		}
		if attempt == 50 {
			return fmt.Errorf("demo: %d replication slot(s) of %s still in use after 5s", left, db)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// SlotName is the demo's replication slot: the demo database's name (a slot's name is
// unique in the server; a database has one demo stream), as PostgreSQL allows it: lower
// case letters, digits and _, at most 63.
func SlotName(db string) string {
	b := []byte(strings.ToLower(db))
	for i, c := range b {
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '_') {
			b[i] = '_'
		}
	}
	return string(b[:min(len(b), 63)])
}

// DSN returns adminDSN with its database replaced by name.
func DSN(adminDSN, name string) (string, error) {
	cfg, err := pgx.ParseConfig(adminDSN)
	if err != nil {
		return "", fmt.Errorf("demo: parse DSN: %w", err)
	}
	user := cfg.User
	if cfg.Password != "" {
		user += ":" + cfg.Password
	}
	return fmt.Sprintf("postgres://%s@%s:%d/%s?sslmode=disable", user, cfg.Host, cfg.Port, name), nil
}
