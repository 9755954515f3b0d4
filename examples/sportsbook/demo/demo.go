// Package demo embeds the demo sportsbook: its schema with seed data (schema.sql) and the
// distributor config that publishes it (distributor.yaml). `cachectl dev` (make demo) uses
// both; README.md describes the demo.
package demo

import _ "embed"

// Schema creates the demo tables and seed rows in an empty database.
//
//go:embed schema.sql
var Schema string

// DistributorYAML is the demo distributor config; postgres.dsn and kafka.brokers are
// placeholders replaced by cachectl dev.
//
//go:embed distributor.yaml
var DistributorYAML []byte

// Topic is the stream the demo config publishes into.
const Topic = "sportsbook"
