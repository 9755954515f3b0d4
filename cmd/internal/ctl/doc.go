// Package ctl holds the operator commands of cachectl that talk to a running statecast:
// Validate checks a distributor config file (Analyze and Connect add what the database
// says of it), Stats prints a player's status, Get reads a view through a player the way a
// service's cache does, and Tail prints a stream's records as they are in Kafka. Each
// writes to an io.Writer (Tail hands each record to a function; Printer writes them) and
// returns an error; cmd/cachectl only parses flags. The demo (cmd/internal/devenv) prints
// its stream with Tail and Printer too.
//
// Files: validate.go (Validate, Analyze, Connect), stats.go (Stats, the output formats),
// get.go (Get), tail.go (Tail, Record, Printer and what it says of compacted transactions,
// KafkaFromConfig), auth.go (Auth: the TLS and bearer token
// flags shared by the commands that reach a player).
package ctl
