package ctl

import (
	"crypto/tls"
	"errors"
	"flag"
	"fmt"
	"os"
	"strings"

	"github.com/statecast/statecast/cacheclient"
)

// EnvToken is the environment variable cachectl reads a bearer token from by default.
const EnvToken = "STATECAST_TOKEN"

// Auth is how cachectl reaches a player that is secured: TLS (a CA, a client
// certificate for mutual TLS) and a bearer token. Its fields are flags (AddFlags); the
// token is read from a file or a variable, never given on the command line, where other
// users of the machine would see it.
type Auth struct {
	TLS       bool
	CAFile    string
	CertFile  string
	KeyFile   string
	TokenFile string
	TokenEnv  string
	Insecure  bool // skip the verification of the player's certificate
}

// AddFlags registers the Auth flags on fs (for: what the token is for, in the help).
func (a *Auth) AddFlags(fs *flag.FlagSet, what string) {
	fs.BoolVar(&a.TLS, "tls", false, "connect over TLS (implied by -ca, -cert)")
	fs.StringVar(&a.CAFile, "ca", "", "PEM file of the CAs that verify "+what+" (default: the system's)")
	fs.StringVar(&a.CertFile, "cert", "", "PEM client certificate (mutual TLS), with -cert-key")
	fs.StringVar(&a.KeyFile, "cert-key", "", "PEM key of -cert (not -key: get names the row to read with it)")
	fs.StringVar(&a.TokenFile, "token-file", "", "file holding the bearer token for "+what)
	fs.StringVar(&a.TokenEnv, "token-env", EnvToken, "environment variable holding the bearer token for "+what+" (used when set and -token-file is not)")
	fs.BoolVar(&a.Insecure, "insecure-skip-verify", false, "do not verify the certificate of "+what+" (tests only)")
}

// TLSConfig returns the TLS config the flags ask for, or nil (plaintext).
func (a *Auth) TLSConfig() (*tls.Config, error) {
	if !a.TLS && a.CAFile == "" && a.CertFile == "" && a.KeyFile == "" && !a.Insecure {
		return nil, nil
	}
	c, err := cacheclient.TLSFiles(a.CAFile, a.CertFile, a.KeyFile)
	if err != nil {
		return nil, fmt.Errorf("-ca/-cert/-cert-key: %w", err)
	}
	c.InsecureSkipVerify = a.Insecure //nolint:gosec // opt-in, for tests
	return c, nil
}

// Token returns the bearer token the flags point at ("" when none): -token-file, else the
// variable -token-env when it is set.
func (a *Auth) Token() (string, error) {
	if a.TokenFile != "" {
		b, err := os.ReadFile(a.TokenFile)
		if err != nil {
			return "", fmt.Errorf("-token-file: %w", err)
		}
		tok := strings.TrimSpace(string(b))
		if tok == "" {
			return "", errors.New("-token-file: the file is empty")
		}
		return tok, nil
	}
	if a.TokenEnv != "" {
		return strings.TrimSpace(os.Getenv(a.TokenEnv)), nil
	}
	return "", nil
}
