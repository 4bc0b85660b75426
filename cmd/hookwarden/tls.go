package main

import (
	"crypto/tls"
	"fmt"
	"net"
	"sync/atomic"

	"github.com/hookwarden/hookwarden/internal/config"
	"github.com/hookwarden/hookwarden/receiver"
)

// certReloader serves the certificate of tls.cert/tls.key and reads the
// files again on reload, so a renewed certificate (certbot, acme.sh) takes
// effect on SIGHUP without dropping a connection. Handshakes always see a
// whole pair: the old one until the new one loaded.
type certReloader struct {
	cert atomic.Pointer[tls.Certificate]
}

func newCertReloader(c config.TLS) (*certReloader, error) {
	pair, err := loadPair(c)
	if err != nil {
		return nil, err
	}
	r := &certReloader{}
	r.cert.Store(pair)
	return r, nil
}

// loadPair reads the certificate chain and key at the paths of c. A reload
// reads the running paths again (changing the paths needs a restart, like
// every listener setting) and swaps the pair in only when the whole reload
// succeeds.
func loadPair(c config.TLS) (*tls.Certificate, error) {
	certPath, keyPath := c.Paths()
	pair, err := tls.LoadX509KeyPair(certPath, keyPath)
	if err != nil {
		// The error names the files, never key material.
		return nil, fmt.Errorf("load certificate and key: %w", err)
	}
	return &pair, nil
}

func (r *certReloader) getCertificate(*tls.ClientHelloInfo) (*tls.Certificate, error) {
	return r.cert.Load(), nil
}

// tlsConfig is the receiver's server side: TLS 1.2 and up with Go's default
// (modern, AEAD-only for 1.2) cipher suites, HTTP/2 and HTTP/1.1.
func (r *certReloader) tlsConfig() *tls.Config {
	return &tls.Config{
		MinVersion:     tls.VersionTLS12,
		GetCertificate: r.getCertificate,
		NextProtos:     []string{"h2", "http/1.1"},
	}
}

// listenReceiver binds the receiver's address, or takes ln (a socket systemd
// passed) when not nil, wrapped in TLS when tls.cert and tls.key are set.
// The returned reloader is nil without TLS.
func listenReceiver(cfg *config.Config, ln net.Listener) (net.Listener, *certReloader, error) {
	if ln == nil {
		var err error
		if ln, err = net.Listen("tcp", cfg.Listen); err != nil {
			return nil, nil, fmt.Errorf("receiver listen: %w", err)
		}
	}
	// Below TLS, so a connection counts from accept, handshake included.
	ln = receiver.LimitListener(ln, cfg.Limits.MaxConnections)
	if !cfg.TLS.Enabled() {
		return ln, nil, nil
	}
	cr, err := newCertReloader(cfg.TLS)
	if err != nil {
		ln.Close()
		return nil, nil, err
	}
	return tls.NewListener(ln, cr.tlsConfig()), cr, nil
}
