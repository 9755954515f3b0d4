package cacheclient

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
)

// TokenSource returns the bearer token of a subscription. It is called for every
// subscription (each connection attempt), so a source that reads a file or asks a token
// service follows a rotation. It must not block longer than ctx allows.
type TokenSource func(ctx context.Context) (string, error)

// StaticToken is a TokenSource of one token.
func StaticToken(token string) TokenSource {
	return func(context.Context) (string, error) { return token, nil }
}

// TokenFile is a TokenSource that reads the token from path at every subscription (its
// content, surrounding white space trimmed): replacing the file rotates the token.
func TokenFile(path string) TokenSource {
	return func(context.Context) (string, error) {
		b, err := os.ReadFile(path)
		if err != nil {
			return "", err
		}
		tok := strings.TrimSpace(string(b))
		if tok == "" {
			return "", fmt.Errorf("token file %s is empty", path)
		}
		return tok, nil
	}
}

// tokenCredentials sends a TokenSource's token as gRPC per-RPC credentials.
type tokenCredentials struct{ src TokenSource }

func (c tokenCredentials) GetRequestMetadata(ctx context.Context, _ ...string) (map[string]string, error) {
	tok, err := c.src(ctx)
	if err != nil {
		return nil, fmt.Errorf("cacheclient: token source: %w", err)
	}
	if tok == "" {
		return nil, errors.New("cacheclient: token source: empty token")
	}
	return map[string]string{"authorization": "Bearer " + tok}, nil
}

// RequireTransportSecurity: gRPC refuses to send the token over a plaintext connection.
func (tokenCredentials) RequireTransportSecurity() bool { return true }

// TLSFiles returns a TLS config from PEM files: caFile verifies the players (empty: the
// system's roots); certFile and keyFile, when set (both), are the client certificate for
// mutual TLS, read again at each connection, so that a rotated certificate needs no
// restart. A missing or malformed file is an error now.
func TLSFiles(caFile, certFile, keyFile string) (*tls.Config, error) {
	c := &tls.Config{MinVersion: tls.VersionTLS12}
	if caFile != "" {
		pem, err := os.ReadFile(caFile)
		if err != nil {
			return nil, fmt.Errorf("%w: CA file: %v", ErrConfig, err)
		}
		c.RootCAs = x509.NewCertPool()
		if !c.RootCAs.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("%w: CA file %s: no PEM certificate found", ErrConfig, caFile)
		}
	}
	switch {
	case certFile == "" && keyFile == "":
		return c, nil
	case certFile == "" || keyFile == "":
		return nil, fmt.Errorf("%w: a client certificate needs both its file and its key's", ErrConfig)
	}
	if _, err := tls.LoadX509KeyPair(certFile, keyFile); err != nil {
		return nil, fmt.Errorf("%w: client certificate %s: %v", ErrConfig, certFile, err)
	}
	c.GetClientCertificate = func(*tls.CertificateRequestInfo) (*tls.Certificate, error) {
		cert, err := tls.LoadX509KeyPair(certFile, keyFile)
		if err != nil {
			return nil, fmt.Errorf("cacheclient: client certificate %s: %w", certFile, err)
		}
		return &cert, nil
	}
	return c, nil
}

// DefaultInstanceID returns an instance id unique to this process: its hostname, its pid
// and a random suffix ("pricing-7d9f-x2/4711-3fa9c2e1"), so that two replicas, or two
// clients of one process, never take each other's place at the player.
func DefaultInstanceID() string {
	host, err := os.Hostname()
	if err != nil || host == "" {
		host = "unknown-host"
	}
	var b [4]byte
	_, _ = rand.Read(b[:])
	return host + "/" + strconv.Itoa(os.Getpid()) + "-" + hex.EncodeToString(b[:])
}

// StateKeyFile reads a Config.StateKey from the file at path (a mounted secret): its
// content without leading and trailing white space, so that a key written by
// "openssl rand -base64 48 > file" is the text without its newline. The key must have at
// least MinStateKeyLen bytes. Errors name the file, never its content.
func StateKeyFile(path string) ([]byte, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("%w: state key: %w", ErrConfig, err)
	}
	key := bytes.TrimSpace(b)
	if len(key) < MinStateKeyLen {
		return nil, fmt.Errorf("%w: state key file %s: %d bytes, at least %d", ErrConfig, path, len(key), MinStateKeyLen)
	}
	return key, nil
}
