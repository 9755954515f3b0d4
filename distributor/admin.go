package distributor

import "github.com/statecast/statecast/internal/daemon"

// AdminConfig is the admin HTTP endpoint (Config.Admin: GET /status, POST
// /reconcile?view=NAME), served apart from the read-only one. The player's AdminConfig has
// the same fields.
type AdminConfig struct {
	// Addr is where it listens; empty: not served.
	Addr string `yaml:"addr"`
	// Tokens, when set, are required on every request (Authorization: Bearer); required
	// when Addr is not a loopback address.
	Tokens TokensConfig `yaml:"tokens"`
	// TLS serves the endpoint over HTTPS (CertFile, KeyFile; ClientCAFile is refused);
	// required with Tokens when Addr is not a loopback address, unless Insecure.
	TLS TLSConfig `yaml:"tls"`
	// Insecure accepts Tokens over plaintext HTTP beyond loopback: only on a network whose
	// every hop is trusted (containers publishing the endpoint on their host's loopback).
	Insecure bool `yaml:"insecure"`
}

// TokensConfig says where bearer tokens are (AdminConfig.Tokens): a file, an environment
// variable, or both (their tokens are merged). Each holds name=token entries, one a line
// (the variable may also separate them with commas; # starts a comment line); a token may
// be given as sha256:<hex> of itself, so that the file need not hold the token. One name
// may have several tokens (the old and the new one during a rotation). The file is read
// again when it changes, so a token is revoked by removing its line; the variable only at
// start. The player's TokensConfig has the same fields.
type TokensConfig struct {
	File string `yaml:"file"`
	Env  string `yaml:"env"`
}

// TLSConfig names the PEM files of a server's TLS (AdminConfig.TLS), read again when they
// change, so a rotated certificate needs no restart. The player's TLSConfig has the same
// fields.
type TLSConfig struct {
	// CertFile and KeyFile are the certificate chain and its key (both or neither).
	CertFile string `yaml:"cert_file"`
	KeyFile  string `yaml:"key_file"`
	// ClientCAFile is the player's mutual TLS setting; the admin endpoint refuses it (use
	// AdminConfig.Tokens).
	ClientCAFile string `yaml:"client_ca_file"`
}

// Enabled reports whether tokens are configured.
func (t TokensConfig) Enabled() bool { return daemon.Tokens(t).Enabled() }

// Enabled reports whether a certificate is configured.
func (t TLSConfig) Enabled() bool { return daemon.ServerTLS(t).Enabled() }

// admin is a as the daemon plumbing checks and loads it.
func (a AdminConfig) admin() daemon.Admin {
	return daemon.Admin{Addr: a.Addr, Tokens: daemon.Tokens(a.Tokens), TLS: daemon.ServerTLS(a.TLS), Insecure: a.Insecure}
}
