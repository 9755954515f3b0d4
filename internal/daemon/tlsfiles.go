package daemon

import (
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"os"
	"sync/atomic"
)

// ServerTLS names the PEM files of a server's TLS: its certificate chain and key and,
// for mutual TLS, the CAs that verify client certificates. The files are read again when
// they change (Watch), so a rotated certificate needs no restart.
type ServerTLS struct {
	CertFile string `yaml:"cert_file"`
	KeyFile  string `yaml:"key_file"`
	// ClientCAFile: clients must present a certificate signed by one of these CAs.
	ClientCAFile string `yaml:"client_ca_file"`
}

// Enabled reports whether a certificate is configured.
func (t ServerTLS) Enabled() bool { return t.CertFile != "" || t.KeyFile != "" }

// Check checks the fields' combination (not the files); field is the config field (tls).
func (t ServerTLS) Check(field string) error {
	var errs []error
	switch {
	case t.CertFile == "" && t.KeyFile != "":
		errs = append(errs, fmt.Errorf("%s.cert_file: required with %s.key_file", field, field))
	case t.CertFile != "" && t.KeyFile == "":
		errs = append(errs, fmt.Errorf("%s.key_file: required with %s.cert_file", field, field))
	}
	if t.ClientCAFile != "" && !t.Enabled() {
		errs = append(errs, fmt.Errorf("%s.client_ca_file: needs %s.cert_file and key_file", field, field))
	}
	return errors.Join(errs...)
}

type tlsState struct {
	cert      *tls.Certificate
	clientCAs *x509.CertPool
	sum       [sha256.Size]byte
}

// TLSFiles is a loaded ServerTLS whose certificate and client CAs follow the files.
type TLSFiles struct {
	cfg   ServerTLS
	field string
	cur   atomic.Pointer[tlsState]
	bad   [sha256.Size]byte
}

// LoadTLS loads the files of t; errors name field and the file, never a key's content.
func LoadTLS(t ServerTLS, field string) (*TLSFiles, error) {
	if err := t.Check(field); err != nil {
		return nil, err
	}
	f := &TLSFiles{cfg: t, field: field}
	st, err := f.load()
	if err != nil {
		return nil, err
	}
	f.cur.Store(st)
	return f, nil
}

func (f *TLSFiles) read() (cert, key, ca []byte, sum [sha256.Size]byte, err error) {
	if cert, err = os.ReadFile(f.cfg.CertFile); err != nil {
		return nil, nil, nil, sum, fmt.Errorf("%s.cert_file: %w", f.field, err)
	}
	if key, err = os.ReadFile(f.cfg.KeyFile); err != nil {
		return nil, nil, nil, sum, fmt.Errorf("%s.key_file: %w", f.field, err)
	}
	if f.cfg.ClientCAFile != "" {
		if ca, err = os.ReadFile(f.cfg.ClientCAFile); err != nil {
			return nil, nil, nil, sum, fmt.Errorf("%s.client_ca_file: %w", f.field, err)
		}
	}
	h := sha256.New()
	for _, b := range [][]byte{cert, key, ca} {
		fmt.Fprintf(h, "%d:", len(b))
		h.Write(b)
	}
	copy(sum[:], h.Sum(nil))
	return cert, key, ca, sum, nil
}

func (f *TLSFiles) load() (*tlsState, error) {
	certPEM, keyPEM, caPEM, sum, err := f.read()
	if err != nil {
		return nil, err
	}
	return f.parse(certPEM, keyPEM, caPEM, sum)
}

func (f *TLSFiles) parse(certPEM, keyPEM, caPEM []byte, sum [sha256.Size]byte) (*tlsState, error) {
	cert, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		// tls's errors describe the PEM blocks found, never their bytes.
		return nil, fmt.Errorf("%s.cert_file/key_file (%s, %s): %w", f.field, f.cfg.CertFile, f.cfg.KeyFile, err)
	}
	st := &tlsState{cert: &cert, sum: sum}
	if caPEM != nil {
		st.clientCAs = x509.NewCertPool()
		if !st.clientCAs.AppendCertsFromPEM(caPEM) {
			return nil, fmt.Errorf("%s.client_ca_file: %s: no PEM certificate found", f.field, f.cfg.ClientCAFile)
		}
	}
	return st, nil
}

// Name is the configuration field (what Watch logs).
func (f *TLSFiles) Name() string { return f.field }

// MutualTLS reports whether client certificates are verified (client_ca_file is set).
func (f *TLSFiles) MutualTLS() bool { return f.cfg.ClientCAFile != "" }

// Reload reads the files again and, when they changed and load, serves the new
// certificate and CAs to the connections that start from then on (established ones keep
// theirs). Files that fail to load, or a certificate and key caught half-written, leave
// the current ones in place; the error is returned once per content.
func (f *TLSFiles) Reload() (changed bool, err error) {
	certPEM, keyPEM, caPEM, sum, err := f.read()
	if err != nil {
		return false, fmt.Errorf("%w; keeping the current certificate", err)
	}
	if sum == f.cur.Load().sum || sum == f.bad {
		return false, nil
	}
	st, err := f.parse(certPEM, keyPEM, caPEM, sum)
	if err != nil {
		f.bad = sum
		return false, fmt.Errorf("%w; keeping the current certificate", err)
	}
	f.cur.Store(st)
	return true, nil
}

// Certificate returns the current certificate.
func (f *TLSFiles) Certificate() *tls.Certificate { return f.cur.Load().cert }

// GetCertificate is a tls.Config.GetCertificate serving the current certificate.
func (f *TLSFiles) GetCertificate(*tls.ClientHelloInfo) (*tls.Certificate, error) {
	return f.cur.Load().cert, nil
}

// ServerConfig returns a TLS 1.2+ server config that takes the current certificate and
// client CAs at each handshake; nextProtos are its ALPN protocols (gRPC: "h2"). With
// client CAs, a client certificate is required when requireClientCert, else verified
// when given (tokens are then the alternative).
func (f *TLSFiles) ServerConfig(requireClientCert bool, nextProtos ...string) *tls.Config {
	base := &tls.Config{MinVersion: tls.VersionTLS12, NextProtos: nextProtos}
	if !f.MutualTLS() {
		base.GetCertificate = f.GetCertificate
		return base
	}
	auth := tls.VerifyClientCertIfGiven
	if requireClientCert {
		auth = tls.RequireAndVerifyClientCert
	}
	base.GetConfigForClient = func(*tls.ClientHelloInfo) (*tls.Config, error) {
		st := f.cur.Load()
		return &tls.Config{MinVersion: tls.VersionTLS12, NextProtos: nextProtos,
			Certificates: []tls.Certificate{*st.cert}, ClientCAs: st.clientCAs, ClientAuth: auth}, nil
	}
	return base
}
