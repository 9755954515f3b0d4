package devenv

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/statecast/statecast/deploy/demo"
)

// DemoDatabase is the database `cachectl dev` (re)creates on the local server.
const DemoDatabase = "statecast_demo"

// SeedDemo drops and re-creates database name on the server of adminDSN, loads the demo
// schema and seed rows into it, and returns the new database's DSN.
func SeedDemo(ctx context.Context, adminDSN, name string) (string, error) {
	admin, err := pgx.Connect(ctx, adminDSN)
	if err != nil {
		return "", fmt.Errorf("devenv: connect to PostgreSQL: %w", err)
	}
	defer admin.Close(context.Background())
	ident := pgx.Identifier{name}.Sanitize()
	if _, err := admin.Exec(ctx, "DROP DATABASE IF EXISTS "+ident+" WITH (FORCE)"); err != nil {
		return "", fmt.Errorf("devenv: drop database %s: %w", name, err)
	}
	if _, err := admin.Exec(ctx, "CREATE DATABASE "+ident); err != nil {
		return "", fmt.Errorf("devenv: create database %s: %w", name, err)
	}
	cfg := admin.Config().Copy()
	cfg.Database = name
	conn, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		return "", fmt.Errorf("devenv: connect to %s: %w", name, err)
	}
	defer conn.Close(context.Background())
	if _, err := conn.Exec(ctx, demo.Schema); err != nil {
		return "", fmt.Errorf("devenv: load deploy/demo/schema.sql: %w", err)
	}
	return DSNFor(adminDSN, name)
}

// DSNFor returns adminDSN with its database replaced by name.
func DSNFor(adminDSN, name string) (string, error) {
	cfg, err := pgx.ParseConfig(adminDSN)
	if err != nil {
		return "", fmt.Errorf("devenv: parse DSN: %w", err)
	}
	user := cfg.User
	if cfg.Password != "" {
		user += ":" + cfg.Password
	}
	return fmt.Sprintf("postgres://%s@%s:%d/%s?sslmode=disable", user, cfg.Host, cfg.Port, name), nil
}
