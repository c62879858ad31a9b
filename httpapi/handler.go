package httpapi

import (
	"context"
	"io"
	"log/slog"
	"maps"
	"math/rand/v2"
	"net/http"
	"net/netip"
	"slices"
	"strings"
	"time"

	"github.com/limitnode/limitnode/auth"
	"github.com/limitnode/limitnode/contract"
	"github.com/limitnode/limitnode/rls"
	"github.com/prometheus/client_golang/prometheus"
)

// Limiter is what the HTTP API needs from a cluster node. *cluster.Node
// implements it; tests use a fake.
type Limiter interface {
	// Allow decides a request; see cluster.Node.Allow for its errors.
	Allow(ctx context.Context, req contract.Request) (contract.Decision, error)
	// AllowBatch decides independent requests together.
	AllowBatch(ctx context.Context, reqs []contract.Request) ([]contract.BatchResult, error)
	// PutPolicy creates or replaces a named policy.
	PutPolicy(ctx context.Context, p contract.Policy) error
	// DeletePolicy deletes a named policy.
	DeletePolicy(ctx context.Context, name string) error
	// Policies lists a page of the policies as this node has applied them:
	// up to limit named after after, holding at most maxOverrides
	// overrides (at least one policy), and the name to continue after.
	Policies(ctx context.Context, after string, limit, maxOverrides int) (page []contract.PolicyStatus, next string)
	// Policy returns one policy as this node has applied it.
	Policy(ctx context.Context, name string) (contract.PolicyStatus, bool)
	// PutRLSConfig creates or replaces a rate limit service domain's
	// configuration.
	PutRLSConfig(ctx context.Context, c rls.Config) error
	// DeleteRLSConfig deletes a domain's configuration.
	DeleteRLSConfig(ctx context.Context, domain string) error
	// RLSConfig returns a domain's configuration as this node has applied
	// it.
	RLSConfig(ctx context.Context, domain string) (rls.Config, bool)
	// RLSDomains returns the configured domains, sorted.
	RLSDomains(ctx context.Context) []string
	// AcquireLease takes one of req.Max concurrent slots of req.Key.
	AcquireLease(ctx context.Context, req contract.LeaseRequest) (contract.Lease, error)
	// RenewLease moves a held lease's expiry to ttl from now.
	RenewLease(ctx context.Context, id string, ttl time.Duration) (contract.Lease, error)
	// ReleaseLease gives a lease back, or takes a waiting request out of
	// its queue.
	ReleaseLease(ctx context.Context, id string) (atNanos int64, err error)
	// Leases returns the leases held on key and the requests waiting for
	// one as this node has applied them, with the cluster time of that
	// state.
	Leases(key string) (nowNanos int64, leases []contract.HeldLease, queued []contract.QueuedLease)
	// Join adds a member to the cluster, with the checks change lifts.
	Join(ctx context.Context, m contract.Member, change contract.MemberChange) error
	// RemoveMember removes a member from the cluster, with the checks
	// change lifts.
	RemoveMember(ctx context.Context, id string, change contract.MemberChange) error
	// TransferLeadership hands leadership over to the member to (any
	// other voter when "").
	TransferLeadership(ctx context.Context, to string) error
	// Backup freezes this node's state for a backup file, once it has
	// caught up with the leader.
	Backup(ctx context.Context) (contract.Backup, error)
	// Restore replaces the cluster's state with a backup file's (on the
	// leader; elsewhere a *contract.NotLeaderError).
	Restore(ctx context.Context, r io.Reader) (backup contract.BackupInfo, restoredIndex uint64, err error)
	// CheckConsistency compares every member's state with the leader's at
	// a new checkpoint.
	CheckConsistency(ctx context.Context) (contract.ConsistencyReport, error)
	// Status returns the node's view of the cluster.
	Status() contract.Status
	// Stats returns the decisions the node has applied lately, with up to
	// top heavy hitters each.
	Stats(ctx context.Context, top int) contract.Stats
	// Ready returns "" when the node serves as a member, else why not.
	Ready() string
}

// Options configures the handler. The zero value is usable.
type Options struct {
	// Logger receives one record per request that failed with a 5xx.
	Logger *slog.Logger
	// RequestTimeout bounds how long a request waits for the cluster.
	// Default 5s.
	RequestTimeout time.Duration
	// Jitter returns a uniformly random integer in [0, n]; it spreads the
	// Retry-After of denied clients. Default math/rand/v2. Tests fix it.
	Jitter func(n int64) int64
	// TrustedProxies are the proxies whose X-Forwarded-For
	// /v1/forward-auth believes for the client_ip source (the right-most
	// address not among them is the client). Nil means
	// DefaultTrustedProxies; empty means none: the connecting peer is the
	// client.
	TrustedProxies []netip.Prefix
	// Authorizer, when set, makes every route but /healthz and /readyz
	// need a bearer token with the route's role. *auth.File implements
	// it. Nil: no tokens, every route is open.
	Authorizer auth.Authorizer
	// Collectors are more Prometheus metrics for /metrics: the gRPC API's,
	// when the node serves one.
	Collectors []prometheus.Collector
}

// API is limitnode's HTTP API over one node.
type API struct {
	routes  []string // the paths registered, in order
	limiter Limiter
	opts    Options
	mux     *http.ServeMux
	metrics *metrics
}

// New returns the HTTP API of the node behind limiter.
func New(limiter Limiter, opts Options) *API {
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	if opts.RequestTimeout <= 0 {
		opts.RequestTimeout = 5 * time.Second
	}
	if opts.Jitter == nil {
		opts.Jitter = func(n int64) int64 { return rand.Int64N(n + 1) }
	}
	a := &API{limiter: limiter, opts: opts, mux: http.NewServeMux(), metrics: newMetrics(limiter, opts.Collectors)}
	decide, read, admin := auth.RoleDecide, auth.RoleRead, auth.RoleAdmin
	a.route("/v1/allow", map[string]endpoint{http.MethodPost: {decide, a.allow}})
	a.route("/v1/allow/batch", map[string]endpoint{http.MethodPost: {decide, a.allowBatch}})
	forwardAuth := map[string]endpoint{}
	for _, m := range forwardAuthMethods {
		forwardAuth[m] = endpoint{decide, a.forwardAuth}
	}
	a.route("/v1/forward-auth", forwardAuth)
	a.route("/v1/policies", map[string]endpoint{http.MethodGet: {read, a.listPolicies}})
	a.route("/v1/policies/{name}", map[string]endpoint{
		http.MethodGet: {read, a.getPolicy}, http.MethodPut: {admin, a.putPolicy}, http.MethodDelete: {admin, a.deletePolicy},
	})
	a.route("/v1/rls/domains", map[string]endpoint{http.MethodGet: {read, a.listRLSDomains}})
	a.route("/v1/rls/domains/{domain}", map[string]endpoint{
		http.MethodGet: {read, a.getRLSDomain}, http.MethodPut: {admin, a.putRLSDomain}, http.MethodDelete: {admin, a.deleteRLSDomain},
	})
	a.route("/v1/leases", map[string]endpoint{http.MethodPost: {decide, a.acquireLease}, http.MethodGet: {read, a.listLeases}})
	a.route("/v1/leases/{id}", map[string]endpoint{http.MethodDelete: {decide, a.releaseLease}})
	a.route("/v1/leases/{id}/renew", map[string]endpoint{http.MethodPost: {decide, a.renewLease}})
	a.route("/v1/cluster", map[string]endpoint{http.MethodGet: {read, a.clusterStatus}})
	a.route("/v1/cluster/join", map[string]endpoint{http.MethodPost: {admin, a.join}})
	a.route("/v1/cluster/nodes/{id}", map[string]endpoint{http.MethodDelete: {admin, a.removeNode}})
	a.route("/v1/cluster/transfer-leadership", map[string]endpoint{http.MethodPost: {admin, a.transferLeadership}})
	a.route("/v1/cluster/consistency", map[string]endpoint{http.MethodPost: {admin, a.checkConsistency}})
	a.route("/v1/snapshot", map[string]endpoint{http.MethodGet: {admin, a.backup}, http.MethodPost: {admin, a.restore}})
	a.route("/v1/openapi.json", map[string]endpoint{http.MethodGet: {read, serveOpenAPI}})
	a.route("/v1/stats", map[string]endpoint{http.MethodGet: {read, a.stats}})
	a.route("/", map[string]endpoint{http.MethodGet: {read, a.statusPage}})
	a.route("/healthz", map[string]endpoint{http.MethodGet: {open, a.healthz}})
	a.route("/readyz", map[string]endpoint{http.MethodGet: {open, a.readyz}})
	a.route("/metrics", map[string]endpoint{http.MethodGet: {read, a.metrics.handler().ServeHTTP}})
	a.mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		writeError(w, notFound("", "no such endpoint: %s", r.URL.Path))
	})
	return a
}

// endpoint is one method of a route: the role a token needs to call it
// (open: none, even when tokens are on) and its handler.
type endpoint struct {
	role    auth.Role
	handler http.HandlerFunc
}

// open marks an endpoint anyone may call: the health checks.
const open auth.Role = ""

// route registers a path with one endpoint per method; any other method is
// a 405 with an Allow header and a JSON body (net/http's own 405 is plain
// text). HEAD is answered for GET. A call that lacks the endpoint's role is
// refused before its handler runs (see authorize).
func (a *API) route(path string, byMethod map[string]endpoint) {
	a.routes = append(a.routes, path)
	if e, ok := byMethod[http.MethodGet]; ok {
		byMethod[http.MethodHead] = e
	}
	allow := strings.Join(slices.Sorted(maps.Keys(byMethod)), ", ")
	pattern := path
	if path == "/" {
		pattern = "/{$}" // the status page; every other unknown path is the catch-all's
	}
	a.mux.HandleFunc(pattern, a.metrics.instrument(path, a.accessLog(path, func(w http.ResponseWriter, r *http.Request) {
		e, ok := byMethod[r.Method]
		if !ok {
			w.Header().Set("Allow", allow)
			writeError(w, &apiError{status: http.StatusMethodNotAllowed, code: codeMethodNotAllowed,
				message: r.Method + " is not allowed on " + path + "; use " + allow})
			return
		}
		if r = a.authorize(w, r, e.role); r == nil {
			return
		}
		e.handler(w, r)
	})))
}

// ServeHTTP serves the API.
func (a *API) ServeHTTP(w http.ResponseWriter, r *http.Request) { a.mux.ServeHTTP(w, r) }
