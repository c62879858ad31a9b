package httpapi

import (
	"log/slog"
	"maps"
	"math/rand/v2"
	"net/http"
	"net/netip"
	"slices"
	"strings"
	"time"

	"github.com/limitnode/limitnode/auth"
	"github.com/prometheus/client_golang/prometheus"
)

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
	// it. Nil: no tokens, every route is open to a caller that names the
	// node by its address or localhost (see refuseCrossSite).
	Authorizer auth.Authorizer
	// Collectors are more Prometheus metrics for /metrics: the gRPC API's,
	// when the node serves one.
	Collectors []prometheus.Collector
	// Proven, when set, is called with each request that proves its
	// caller, before its handler runs: one to a route other than /healthz
	// and /readyz that authorize let through (with tokens on, its token
	// has the route's role). The node uses it to let that connection idle
	// for longer than one that has proven nothing.
	Proven func(*http.Request)
	// Admit, when set, is asked before each request to a route is served:
	// a request it refuses is a 503 (code unavailable, Retry-After 1),
	// and done, called once the request is answered, gives its place
	// back. The node uses it to cap the requests under way from one client
	// address, which one HTTP/2 connection can carry hundreds of.
	Admit func(*http.Request) (done func(), ok bool)
	// Profiling serves Go's profiles (net/http/pprof) under
	// /debug/pprof/ for the admin role; off by default.
	Profiling bool
}

// API is limitnode's HTTP API over one node.
type API struct {
	routes  []string // the paths registered, in order
	backend roles
	opts    Options
	mux     *http.ServeMux
	metrics *metrics
}

// New returns the HTTP API over backend: every route of the jobs it does
// (see roles), and a 501 for the others. Pass a *cluster.Node for all of
// them.
func New(backend Decider, opts Options) *API {
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	if opts.RequestTimeout <= 0 {
		opts.RequestTimeout = 5 * time.Second
	}
	if opts.Jitter == nil {
		opts.Jitter = func(n int64) int64 { return rand.Int64N(n + 1) }
	}
	b := rolesOf(backend)
	a := &API{backend: b, opts: opts, mux: http.NewServeMux(), metrics: newMetrics(b.Observer, opts.Collectors)}
	decide, read, admin := auth.RoleDecide, auth.RoleRead, auth.RoleAdmin
	policies, domains, leases := jobOf(b.Policies, "PolicyStore"), jobOf(b.RLS, "RLSStore"), jobOf(b.Leases, "LeaseKeeper")
	members, backups, observer := jobOf(b.Membership, "Membership"), jobOf(b.Backups, "Backups"), jobOf(b.Observer, "Observer")
	keys, blocks, audit, settler := jobOf(b.Keys, "KeyStore"), jobOf(b.Blocks, "BlockList"), jobOf(b.Audit, "AuditLog"), jobOf(b.Settler, "Settler")
	a.route("/v1/allow", map[string]endpoint{http.MethodPost: {decide, a.allow}})
	// The design's path for services, answered by the same endpoint.
	a.route("/allow", map[string]endpoint{http.MethodPost: {decide, a.allow}})
	a.route("/v1/allow/batch", map[string]endpoint{http.MethodPost: {decide, a.allowBatch}})
	a.route("/v1/settle", map[string]endpoint{http.MethodPost: {decide, needs(a.settle, settler)}})
	a.route("/v1/shares/return", map[string]endpoint{http.MethodPost: {decide, a.returnShare}})
	forwardAuth := map[string]endpoint{}
	for _, m := range forwardAuthMethods {
		forwardAuth[m] = endpoint{decide, a.forwardAuth}
	}
	a.route(forwardAuthRoute, forwardAuth)
	a.route("/v1/policies", map[string]endpoint{http.MethodGet: {read, needs(a.listPolicies, policies)}})
	a.route("/v1/policies/{name}", map[string]endpoint{
		http.MethodGet: {read, needs(a.getPolicy, policies)}, http.MethodPut: {admin, needs(a.putPolicy, policies)}, http.MethodDelete: {admin, needs(a.deletePolicy, policies)},
	})
	a.route("/v1/rls/domains", map[string]endpoint{http.MethodGet: {read, needs(a.listRLSDomains, domains)}})
	a.route("/v1/rls/domains/{domain}", map[string]endpoint{
		http.MethodGet: {read, needs(a.getRLSDomain, domains)}, http.MethodPut: {admin, needs(a.putRLSDomain, domains)}, http.MethodDelete: {admin, needs(a.deleteRLSDomain, domains)},
	})
	a.route("/v1/leases", map[string]endpoint{http.MethodPost: {decide, needs(a.acquireLease, leases)}, http.MethodGet: {read, needs(a.listLeases, leases)}})
	a.route("/v1/leases/{id}", map[string]endpoint{http.MethodDelete: {decide, needs(a.releaseLease, leases)}})
	a.route("/v1/leases/{id}/renew", map[string]endpoint{http.MethodPost: {decide, needs(a.renewLease, leases)}})
	a.route("/v1/keys", map[string]endpoint{http.MethodGet: {read, needs(a.listKeys, keys)}})
	a.route("/v1/keys/{key}", map[string]endpoint{http.MethodGet: {read, needs(a.getKey, keys)}, http.MethodDelete: {admin, needs(a.resetKey, keys)}})
	a.route("/v1/blocks", map[string]endpoint{http.MethodGet: {read, needs(a.listBlocks, blocks)}})
	a.route("/v1/blocks/{key}", map[string]endpoint{http.MethodPut: {admin, needs(a.putBlock, blocks)}, http.MethodDelete: {admin, needs(a.deleteBlock, blocks)}})
	a.route("/v1/audit", map[string]endpoint{http.MethodGet: {read, needs(a.listAudit, audit)}})
	a.route("/v1/cluster", map[string]endpoint{http.MethodGet: {read, needs(a.clusterStatus, observer)}})
	a.route("/v1/cluster/join", map[string]endpoint{http.MethodPost: {admin, needs(a.join, members)}})
	a.route("/v1/cluster/nodes/{id}", map[string]endpoint{http.MethodDelete: {admin, needs(a.removeNode, members)}})
	a.route("/v1/cluster/transfer-leadership", map[string]endpoint{http.MethodPost: {admin, needs(a.transferLeadership, members)}})
	a.route("/v1/cluster/consistency", map[string]endpoint{http.MethodPost: {admin, needs(a.checkConsistency, members)}})
	a.route("/v1/snapshot", map[string]endpoint{http.MethodGet: {admin, needs(a.backup, backups, observer)}, http.MethodPost: {admin, needs(a.restore, backups)}})
	a.route("/v1/openapi.json", map[string]endpoint{http.MethodGet: {read, serveOpenAPI}})
	a.route("/v1/stats", map[string]endpoint{http.MethodGet: {read, needs(a.stats, observer, policies, blocks, audit)}})
	a.route("/", map[string]endpoint{http.MethodGet: {read, needs(a.statusPage, observer, policies, blocks, audit)}})
	a.route("/healthz", map[string]endpoint{http.MethodGet: {open, a.healthz}})
	a.route("/readyz", map[string]endpoint{http.MethodGet: {open, needs(a.readyz, observer)}})
	a.route("/metrics", map[string]endpoint{http.MethodGet: {read, a.metrics.handler().ServeHTTP}})
	if opts.Profiling {
		a.route(pprofRoute, map[string]endpoint{http.MethodGet: {admin, a.serveProfile}, http.MethodPost: {admin, a.serveProfile}})
	}
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
// text). HEAD is answered for GET. A call that a page of another site may
// have sent is refused when it could change state, or, without tokens,
// whenever the route answers with more than health (see refuseCrossSite),
// a call that lacks the endpoint's role is refused
// (see authorize), and a path segment that is not valid UTF-8 (a key
// written %ff) is refused as a JSON string would be (see checkString), all
// before the handler runs: every route reads its segments one way.
func (a *API) route(path string, byMethod map[string]endpoint) {
	a.routes = append(a.routes, path)
	if e, ok := byMethod[http.MethodGet]; ok {
		byMethod[http.MethodHead] = e
	}
	allow := strings.Join(slices.Sorted(maps.Keys(byMethod)), ", ")
	wildcards := pathWildcards(path)
	pattern := path
	if path == "/" {
		pattern = "/{$}" // the status page; every other unknown path is the catch-all's
	}
	a.mux.HandleFunc(pattern, a.metrics.instrument(path, a.accessLog(path, func(w http.ResponseWriter, r *http.Request) {
		if a.opts.Admit != nil {
			done, ok := a.opts.Admit(r)
			if !ok {
				writeError(w, unavailable("too many requests under way from this client address at once; retry when some have been answered"))
				return
			}
			defer done()
		}
		e, ok := byMethod[r.Method]
		if !ok {
			w.Header().Set("Allow", allow)
			writeError(w, &apiError{status: http.StatusMethodNotAllowed, code: codeMethodNotAllowed,
				message: r.Method + " is not allowed on " + path + "; use " + allow})
			return
		}
		if err := a.refuseCrossSite(path, e.role, r); err != nil {
			writeError(w, err)
			return
		}
		if r = a.authorize(w, r, e.role); r == nil {
			return
		}
		for _, name := range wildcards {
			if err := checkString(r.PathValue(name), name); err != nil {
				writeError(w, err)
				return
			}
		}
		if e.role != open && a.opts.Proven != nil {
			a.opts.Proven(r)
		}
		e.handler(w, r)
	})))
}

// pathWildcards returns the names of path's wildcards: "key" for
// "/v1/keys/{key}".
func pathWildcards(path string) []string {
	var names []string
	for segment := range strings.SplitSeq(path, "/") {
		if name, ok := strings.CutPrefix(segment, "{"); ok {
			names = append(names, strings.TrimSuffix(strings.TrimSuffix(name, "}"), "..."))
		}
	}
	return names
}

// ServeHTTP serves the API.
func (a *API) ServeHTTP(w http.ResponseWriter, r *http.Request) { a.mux.ServeHTTP(w, r) }
