// Package daemon holds what statecast's two daemons, the distributor and the player, share
// in their shape, so that a maintainer who knows one knows the other:
//
//   - Load/Parse over LoadYAML/DecodeYAML: the config file loader behind
//     distributor.LoadConfig and player.LoadConfig (strict fields, ${VAR} expansion in
//     values after parsing, then the config's Validate);
//   - ListenServers/Servers.Serve: the two HTTP endpoints that each daemon's Run listens on
//     first and serves until it ends, the read-only one (/metrics, /livez, /readyz,
//     /healthz) on its Config.HTTPAddr and the admin one, whose files it reloads
//     (ListenHTTP/HTTPServer are one endpoint);
//   - Default: the one rule for a number of a config (zero: the default; negative: an
//     error naming the key);
//   - Main/OnSignal: the commands' main (flags, logger, registry, signals, exit status),
//     which logs a graceful stop ("<name> stopping" with the signal, "<name> stopped" with
//     how long it took); NewLogger: the daemons' JSON logger, durations written readable
//     (ReadableDurations);
//   - the security both share: bearer tokens kept as hashes and compared in constant time
//     (Tokens, TokenSet), TLS certificates from PEM files (ServerTLS, TLSFiles), both read
//     again when their files change (Watch), and the admin HTTP endpoint that needs a
//     token unless it listens on a loopback address (Admin, AdminServer).
//
// The libraries import it; cmd mains only parse flags, load the config and call Run.
//
// Files: yaml.go (Load, Parse, LoadYAML, DecodeYAML), servers.go (ListenServers,
// Servers), http.go (ListenHTTP, HTTPServer), admin.go (Admin, AdminServer,
// GuardBrowsers, IsLoopback), tokens.go (Tokens, TokenSet, BearerToken, HashToken),
// tokens_metrics.go (TokenCollector: the token sets' state as metrics),
// tlsfiles.go (ServerTLS, TLSFiles), reload.go (Reloadable, Watch), defaults.go
// (Default), main.go (Main, Env, Probe, OnSignal), log.go (NewLogger, ReadableDurations,
// the logged stop). A TokenSet and a TLSFiles are read by
// request goroutines while Watch, on a goroutine of the daemon's, replaces what they
// hold: each keeps its current state behind an atomic pointer.
package daemon
