package main

import (
	"crypto/tls"
	"fmt"
	"log/slog"
	"net"
	"os"
	"strings"

	"github.com/limitnode/limitnode/auth"
	"github.com/limitnode/limitnode/certs"
	"github.com/limitnode/limitnode/cluster"
)

// secured is the security material of a node, read at start: a file that is
// missing, unreadable or malformed stops the node with one line naming it.
// Files are re-read when they change; a bad new version is logged and the
// last good one kept.
type secured struct {
	httpTLS   *tls.Config      // nil: plain HTTP
	nodeTLS   *cluster.NodeTLS // nil: plain TCP on the Raft port
	authz     *auth.File       // nil: no tokens
	joinTLS   *tls.Config      // for -join over HTTPS; nil: plain HTTP
	joinToken string           // sent with -join; "": none
}

func loadSecurity(s security, logger *slog.Logger) (secured, error) {
	var out secured
	reloadFailed := func(what string) func(error) {
		return func(err error) { logger.Error("refused a changed "+what+"; keeping the last good one", "err", err) }
	}
	var httpPair *certs.KeyPair
	if s.tlsCert != "" {
		pair, err := certs.LoadKeyPair(s.tlsCert, s.tlsKey, reloadFailed("-tls-cert/-tls-key"))
		if err != nil {
			return out, err
		}
		httpPair = pair
		out.httpTLS = &tls.Config{MinVersion: tls.VersionTLS12, GetCertificate: pair.GetCertificate}
		if s.tlsClientCA != "" {
			pool, err := certs.LoadPool(s.tlsClientCA, reloadFailed("-tls-client-ca"))
			if err != nil {
				return out, err
			}
			base := out.httpTLS
			out.httpTLS = &tls.Config{MinVersion: tls.VersionTLS12, GetConfigForClient: func(*tls.ClientHelloInfo) (*tls.Config, error) {
				c := base.Clone()
				c.ClientAuth = tls.RequireAndVerifyClientCert
				c.ClientCAs = pool.CertPool()
				return c, nil
			}}
		}
	}
	var nodeCAs *certs.Pool
	if s.nodeCert != "" {
		pair, err := certs.LoadKeyPair(s.nodeCert, s.nodeKey, reloadFailed("-node-cert/-node-key"))
		if err != nil {
			return out, err
		}
		if nodeCAs, err = certs.LoadPool(s.nodeCA, reloadFailed("-node-ca")); err != nil {
			return out, err
		}
		out.nodeTLS = &cluster.NodeTLS{Certificate: pair.Certificate, CAs: nodeCAs.CertPool}
	}
	if s.authFile != "" {
		file, err := auth.OpenFile(s.authFile, reloadFailed("-auth token file"))
		if err != nil {
			return out, err
		}
		out.authz = file
	}
	out.joinToken = s.joinToken
	if s.joinTokenFile != "" {
		token, err := readJoinToken(s.joinTokenFile)
		if err != nil {
			return out, err
		}
		out.joinToken = token
	}
	joinCAs := nodeCAs
	if s.joinCA != "" {
		pool, err := certs.LoadPool(s.joinCA, nil)
		if err != nil {
			return out, err
		}
		joinCAs = pool
	}
	if s.tlsCert != "" || s.joinCA != "" {
		out.joinTLS = &tls.Config{MinVersion: tls.VersionTLS12}
		if joinCAs != nil {
			out.joinTLS.RootCAs = joinCAs.CertPool()
		}
		if httpPair != nil {
			// Members that ask for client certificates get this node's.
			out.joinTLS.GetClientCertificate = httpPair.GetClientCertificate
		}
	}
	return out, nil
}

// readJoinToken reads the token of -join-token-file: its first line,
// without surrounding blanks.
func readJoinToken(path string) (string, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return "", fmt.Errorf("-join-token-file: %w", err)
	}
	line, _, _ := strings.Cut(string(data), "\n")
	if token := strings.TrimSpace(line); token != "" {
		return token, nil
	}
	return "", fmt.Errorf("-join-token-file %s: the first line is empty; it must hold the token", path)
}

// warnIfExposed says, once at start, what an operator exposes by listening
// beyond loopback without protection: on the HTTP and gRPC ports, tokens
// and TLS (each missing one named), on the Raft port, mutual TLS.
func warnIfExposed(logger *slog.Logger, c config, s secured) {
	apis := []struct{ name, flag, addr, without string }{
		{"HTTP", "-http", c.httpAddr, "change policies and membership, restore backups and spend any key's budget"},
		{"gRPC", "-grpc", c.grpcAddr, "spend any key's budget through ShouldRateLimit and list the services"},
	}
	for _, api := range apis {
		if api.addr == "" || isLoopback(api.addr) {
			continue
		}
		switch {
		case s.httpTLS == nil && s.authz == nil:
			logger.Warn("the "+api.name+" API listens beyond loopback with neither TLS nor tokens: anyone who reaches it can "+api.without+", and read and alter its traffic; see -tls-cert and -auth", strings.TrimPrefix(api.flag, "-"), api.addr)
		case s.authz == nil:
			logger.Warn("the "+api.name+" API listens beyond loopback without tokens: TLS keeps its traffic private, but anyone who reaches it can "+api.without+"; see -auth", strings.TrimPrefix(api.flag, "-"), api.addr)
		case s.httpTLS == nil:
			logger.Warn("the "+api.name+" API listens beyond loopback without TLS: its bearer tokens cross the network in clear, for anyone on the way to read and reuse; see -tls-cert", strings.TrimPrefix(api.flag, "-"), api.addr)
		}
	}
	if !isLoopback(c.raftAddr) && s.nodeTLS == nil {
		logger.Warn("the Raft port listens beyond loopback without mutual TLS: any peer that reaches it can take part in Raft; see -node-cert, -node-key and -node-ca", "raft", c.raftAddr)
	}
}

// isLoopback reports whether addr listens on a loopback address only.
func isLoopback(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false
	}
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}
