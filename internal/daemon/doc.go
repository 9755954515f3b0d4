// Package daemon holds what statecast's two daemons, the distributor and the player, share
// in their shape, so that a maintainer who knows one knows the other:
//
//   - LoadYAML/DecodeYAML: the config file loader behind distributor.LoadConfig and
//     player.LoadConfig (strict fields, ${VAR} expansion in values after parsing);
//   - ListenHTTP/HTTPServer.Serve: the HTTP endpoint that each daemon's Run serves
//     (/metrics, /healthz and the daemon's own pages) on its Config.HTTPAddr;
//   - Main/OnSignal: the commands' main (flags, logger, registry, signals, exit status).
//
// The libraries import it; cmd mains only parse flags, load the config and call Run.
package daemon
