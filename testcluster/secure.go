package testcluster

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net/http"
	"os"
	"strings"
	"sync"

	"github.com/limitnode/limitnode/auth"
	"github.com/limitnode/limitnode/certs"
	"github.com/limitnode/limitnode/cluster"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
)

// SecureEnv, set to 1 in the environment, makes every cluster Start starts
// secure (Options.Secure), so that a whole test suite runs over TLS with
// tokens: LIMITNODE_TEST_SECURE=1 go test ./...
const SecureEnv = "LIMITNODE_TEST_SECURE"

// material is this process's test CA, its node certificates and the API
// tokens of secure clusters: one set for all of them, so that HTTPClient
// can call any.
type material struct {
	ca     *certs.DevCA
	pool   *x509.CertPool
	tokens map[auth.Role]string
	authz  *auth.Tokens

	mu    sync.Mutex
	nodes map[string]*tls.Certificate
}

var testMaterial = sync.OnceValue(func() *material {
	ca, err := certs.NewDevCA()
	if err != nil {
		panic(fmt.Sprintf("testcluster: a test CA: %v", err))
	}
	m := &material{ca: ca, pool: ca.Pool(), tokens: map[auth.Role]string{}, nodes: map[string]*tls.Certificate{}}
	var entries []string
	for _, role := range []auth.Role{auth.RoleDecide, auth.RoleRead, auth.RoleAdmin} {
		token, hash := auth.NewToken()
		m.tokens[role] = token
		entries = append(entries, fmt.Sprintf(`{"name": "test-%s", "sha256": %q, "roles": [%q]}`, role, hash, role))
	}
	if m.authz, err = auth.Parse(strings.NewReader(`{"tokens": [` + strings.Join(entries, ",") + `]}`)); err != nil {
		panic(fmt.Sprintf("testcluster: test tokens: %v", err))
	}
	return m
})

// certificate returns the node certificate of name, made once.
func (m *material) certificate(name string) *tls.Certificate {
	m.mu.Lock()
	defer m.mu.Unlock()
	if c := m.nodes[name]; c != nil {
		return c
	}
	c, err := m.ca.Issue(name)
	if err != nil {
		panic(fmt.Sprintf("testcluster: certificate for %s: %v", name, err))
	}
	m.nodes[name] = c
	return c
}

// nodeTLS is the mutual TLS of a secure node's Raft port.
func (m *material) nodeTLS(name string) *cluster.NodeTLS {
	return &cluster.NodeTLS{
		Certificate: func() *tls.Certificate { return m.certificate(name) },
		CAs:         func() *x509.CertPool { return m.pool },
	}
}

// serverTLS is the TLS of a secure node's HTTP API.
func (m *material) serverTLS(name string) *tls.Config {
	return &tls.Config{MinVersion: tls.VersionTLS12, Certificates: []tls.Certificate{*m.certificate(name)}}
}

// Token returns the API token of a secure cluster with role (every secure
// cluster of the process has the same three: decide, read, admin).
func Token(role auth.Role) string { return testMaterial().tokens[role] }

// CAs returns the pool of the CA that signs every secure cluster's
// certificates, for clients that check them.
func CAs() *x509.CertPool { return testMaterial().pool }

// OtherCA returns node TLS signed by a CA no test cluster trusts, as a
// stranger's node would have.
func OtherCA(name string) (*cluster.NodeTLS, error) {
	ca, err := certs.NewDevCA()
	if err != nil {
		return nil, err
	}
	cert, err := ca.Issue(name)
	if err != nil {
		return nil, err
	}
	pool := ca.Pool()
	return &cluster.NodeTLS{Certificate: func() *tls.Certificate { return cert }, CAs: func() *x509.CertPool { return pool }}, nil
}

// HTTPClient returns a client for the HTTP API of any test cluster, secure
// or not: it trusts the test CA and sends the admin token unless the
// request carries its own Authorization.
func HTTPClient() *http.Client { return sharedClient() }

var sharedClient = sync.OnceValue(func() *http.Client {
	transport := http.DefaultTransport.(*http.Transport).Clone()
	transport.TLSClientConfig = &tls.Config{MinVersion: tls.VersionTLS12, RootCAs: testMaterial().pool}
	transport.MaxIdleConnsPerHost = 64
	return &http.Client{Transport: &withToken{next: transport, token: Token(auth.RoleAdmin)}}
})

// withToken adds a bearer token to requests that have none.
type withToken struct {
	next  http.RoundTripper
	token string
}

func (w *withToken) RoundTrip(r *http.Request) (*http.Response, error) {
	if r.Header.Get("Authorization") == "" {
		r = r.Clone(r.Context())
		r.Header.Set("Authorization", "Bearer "+w.token)
	}
	return w.next.RoundTrip(r)
}

func secureFromEnv() bool { return os.Getenv(SecureEnv) == "1" }

// DialGRPC connects to the node's gRPC API: over TLS trusting the test CA,
// with the decide token, for a secure cluster; plaintext otherwise. The
// connection is closed when the test ends.
func (n *Node) DialGRPC() *grpc.ClientConn {
	n.c.t.Helper()
	n.mu.Lock()
	addr, secure := n.GRPCAddr, n.c.opts.Secure
	n.mu.Unlock()
	opts := []grpc.DialOption{grpc.WithTransportCredentials(insecure.NewCredentials())}
	if secure {
		opts = []grpc.DialOption{
			grpc.WithTransportCredentials(credentials.NewTLS(&tls.Config{MinVersion: tls.VersionTLS12, RootCAs: testMaterial().pool, ServerName: "127.0.0.1"})),
			grpc.WithPerRPCCredentials(bearer(Token(auth.RoleDecide))),
		}
	}
	conn, err := grpc.NewClient(addr, opts...)
	if err != nil {
		n.c.t.Fatalf("testcluster: dial gRPC of %s: %v", n.ID, err)
	}
	n.c.t.Cleanup(func() { _ = conn.Close() })
	return conn
}

// bearer sends a token as gRPC's "authorization" metadata.
type bearer string

func (b bearer) GetRequestMetadata(context.Context, ...string) (map[string]string, error) {
	return map[string]string{"authorization": "Bearer " + string(b)}, nil
}

func (bearer) RequireTransportSecurity() bool { return true }

// NodeTLS returns the mutual TLS a node named id of this cluster's kind
// uses on its Raft port (nil for a plain cluster), for a test that opens a
// node of its own beside the cluster's: with it, that node gets past the
// TLS handshake as a member would.
func (c *Cluster) NodeTLS(id string) *cluster.NodeTLS {
	if !c.opts.Secure {
		return nil
	}
	return testMaterial().nodeTLS(id)
}
