package transport

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"time"
)

// TLS makes a node's Raft port speak mutual TLS: every connection, in both
// directions, presents this node's certificate and verifies the peer's
// against the CA that signs every member's; plaintext and certificates of
// another CA are refused. A dialing node also checks that the certificate
// names the address it dialed (an IP address or a DNS name in the
// certificate's subject alternative names).
type TLS struct {
	// Certificate returns this node's certificate and key. It is called for
	// every handshake, so a certificate re-read from disk takes effect for
	// the next connection.
	Certificate func() *tls.Certificate
	// CAs returns the pool of the CA that signs the members' certificates,
	// also for every handshake.
	CAs func() *x509.CertPool
}

// serverConfig is the configuration of one accepted connection.
func (t *TLS) serverConfig() *tls.Config {
	return &tls.Config{
		MinVersion:   tls.VersionTLS12,
		Certificates: []tls.Certificate{*t.Certificate()},
		ClientAuth:   tls.RequireAndVerifyClientCert,
		ClientCAs:    t.CAs(),
	}
}

// clientConfig is the configuration of one connection to addr.
func (t *TLS) clientConfig(addr string) *tls.Config {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		host = addr
	}
	return &tls.Config{
		MinVersion:   tls.VersionTLS12,
		Certificates: []tls.Certificate{*t.Certificate()},
		RootCAs:      t.CAs(),
		ServerName:   host,
	}
}

// handshake runs a TLS handshake on conn within timeout, closing conn if it
// fails, but for a peer that sent no TLS at all: then the error is a
// tls.RecordHeaderError whose Conn, still open, is the caller's to answer
// or close.
func handshake(conn *tls.Conn, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	if err := conn.HandshakeContext(ctx); err != nil {
		if plain := (tls.RecordHeaderError{}); !errors.As(err, &plain) || plain.Conn == nil {
			conn.Close()
		}
		return fmt.Errorf("TLS handshake with %s: %w", conn.RemoteAddr(), err)
	}
	return nil
}
