// Package ctl holds the operator commands of cachectl that talk to a running statecast:
// Validate checks a distributor config file, Stats prints a player's status, Get reads a
// view through a player the way a service's cache does. Each writes to an io.Writer and
// returns an error; cmd/cachectl only parses flags. (The demo and tail live in
// cmd/internal/devenv.)
package ctl
