// Package daemon holds what statecast's two daemons, the distributor and the player, share
// in their shape, so that a maintainer who knows one knows the other:
//
//   - LoadYAML/DecodeYAML: the config file loader behind distributor.LoadConfig and
//     player.LoadConfig (strict fields, ${VAR} expansion in values after parsing);
//   - ListenHTTP/HTTPServer.Serve: the HTTP endpoint that each daemon's Run serves
//     (/metrics, /livez, /readyz, /healthz and the daemon's own pages) on its Config.HTTPAddr;
//   - Main/OnSignal: the commands' main (flags, logger, registry, signals, exit status);
//   - the security both share: bearer tokens kept as hashes and compared in constant time
//     (Tokens, TokenSet), TLS certificates from PEM files (ServerTLS, TLSFiles), both read
//     again when their files change (Watch), and the admin HTTP endpoint that needs a
//     token unless it listens on a loopback address (Admin, AdminServer).
//
// The libraries import it; cmd mains only parse flags, load the config and call Run.
package daemon
