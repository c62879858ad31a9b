package httpapi

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/limitnode/limitnode/algorithms"
	"github.com/limitnode/limitnode/cluster"
)

// Limiter is what the HTTP API needs from a cluster node. *cluster.Node
// implements it; tests use a fake.
type Limiter interface {
	// Allow decides a request; see cluster.Node.Allow for its errors.
	Allow(ctx context.Context, req cluster.Request) (cluster.Decision, error)
	// AllowBatch decides independent requests together.
	AllowBatch(ctx context.Context, reqs []cluster.Request) ([]cluster.BatchResult, error)
	// PutPolicy creates or replaces a named policy.
	PutPolicy(ctx context.Context, p cluster.Policy) error
	// DeletePolicy deletes a named policy.
	DeletePolicy(ctx context.Context, name string) error
	// Policies lists the policies as this node has applied them.
	Policies() []cluster.PolicyStatus
	// Policy returns one policy as this node has applied it.
	Policy(name string) (cluster.PolicyStatus, bool)
	// AcquireLease takes one of max concurrent slots of key for ttl.
	AcquireLease(ctx context.Context, key string, max int64, ttl time.Duration) (cluster.Lease, error)
	// ReleaseLease gives a lease back.
	ReleaseLease(ctx context.Context, id string) error
	// Join adds a member to the cluster.
	Join(ctx context.Context, m cluster.Member) error
	// RemoveMember removes a member from the cluster.
	RemoveMember(ctx context.Context, id string) error
	// Status returns the node's view of the cluster.
	Status() cluster.Status
	// Ready reports whether the node knows a leader and is caught up.
	Ready() bool
}

var _ Limiter = (*cluster.Node)(nil)

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
}

// API is limitnode's HTTP API over one node.
type API struct {
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
	a := &API{limiter: limiter, opts: opts, mux: http.NewServeMux(), metrics: newMetrics(limiter)}
	a.route("/v1/allow", map[string]http.HandlerFunc{http.MethodPost: a.allow})
	a.route("/v1/allow/batch", map[string]http.HandlerFunc{http.MethodPost: a.allowBatch})
	a.route("/v1/policies", map[string]http.HandlerFunc{http.MethodGet: a.listPolicies})
	a.route("/v1/policies/{name}", map[string]http.HandlerFunc{
		http.MethodGet: a.getPolicy, http.MethodPut: a.putPolicy, http.MethodDelete: a.deletePolicy,
	})
	a.route("/v1/leases", map[string]http.HandlerFunc{http.MethodPost: a.acquireLease})
	a.route("/v1/leases/{id}", map[string]http.HandlerFunc{http.MethodDelete: a.releaseLease})
	a.route("/v1/cluster", map[string]http.HandlerFunc{http.MethodGet: a.clusterStatus})
	a.route("/v1/cluster/join", map[string]http.HandlerFunc{http.MethodPost: a.join})
	a.route("/v1/cluster/nodes/{id}", map[string]http.HandlerFunc{http.MethodDelete: a.removeNode})
	a.route("/healthz", map[string]http.HandlerFunc{http.MethodGet: a.healthz})
	a.route("/readyz", map[string]http.HandlerFunc{http.MethodGet: a.readyz})
	metricsHandler := a.metrics.handler()
	a.route("/metrics", map[string]http.HandlerFunc{http.MethodGet: metricsHandler.ServeHTTP})
	a.mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		writeError(w, &apiError{status: http.StatusNotFound, code: "not_found", message: "no such endpoint: " + r.URL.Path})
	})
	return a
}

// route registers a path with one handler per method; any other method is a
// 405 with an Allow header and a JSON body (net/http's own 405 is plain
// text). HEAD is answered for GET.
func (a *API) route(path string, byMethod map[string]http.HandlerFunc) {
	var allowed []string
	for m := range byMethod {
		allowed = append(allowed, m)
	}
	if _, ok := byMethod[http.MethodGet]; ok {
		byMethod[http.MethodHead] = byMethod[http.MethodGet]
		allowed = append(allowed, http.MethodHead)
	}
	slices.Sort(allowed)
	allow := strings.Join(allowed, ", ")
	a.mux.HandleFunc(path, a.metrics.instrument(path, func(w http.ResponseWriter, r *http.Request) {
		h, ok := byMethod[r.Method]
		if !ok {
			w.Header().Set("Allow", allow)
			writeError(w, &apiError{status: http.StatusMethodNotAllowed, code: "method_not_allowed",
				message: r.Method + " is not allowed on " + path + "; use " + allow})
			return
		}
		h(w, r)
	}))
}

// ServeHTTP serves the API.
func (a *API) ServeHTTP(w http.ResponseWriter, r *http.Request) { a.mux.ServeHTTP(w, r) }

type memberJSON struct {
	ID       string `json:"id"`
	RaftAddr string `json:"raft_addr"`
	HTTPAddr string `json:"http_addr"`
}

type nodeJSON struct {
	memberJSON
	Voter  bool `json:"voter"`
	Leader bool `json:"leader"`
}

type clusterJSON struct {
	Leader       string     `json:"leader"`
	Term         uint64     `json:"term"`
	CommitIndex  uint64     `json:"commit_index"`
	AppliedIndex uint64     `json:"applied_index"`
	Nodes        []nodeJSON `json:"nodes"`
}

func (a *API) clusterStatus(w http.ResponseWriter, _ *http.Request) {
	st := a.limiter.Status()
	out := clusterJSON{Leader: st.LeaderID, Term: st.Term, CommitIndex: st.CommitIndex, AppliedIndex: st.AppliedIndex, Nodes: []nodeJSON{}}
	for _, m := range st.Members {
		out.Nodes = append(out.Nodes, nodeJSON{memberJSON: memberJSON{ID: m.ID, RaftAddr: m.RaftAddr, HTTPAddr: m.HTTPAddr}, Voter: m.Voter, Leader: m.Leader})
	}
	writeJSON(w, http.StatusOK, out)
}

func (a *API) join(w http.ResponseWriter, r *http.Request) {
	var m memberJSON
	if err := decodeJSON(w, r, MaxBodyBytes, &m); err != nil {
		writeError(w, err)
		return
	}
	switch {
	case m.ID == "" || len(m.ID) > 128:
		writeError(w, invalid("id", "id is required and must be at most 128 bytes"))
		return
	case m.RaftAddr == "":
		writeError(w, invalid("raft_addr", "raft_addr is required"))
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), a.opts.RequestTimeout)
	defer cancel()
	if err := a.limiter.Join(ctx, cluster.Member{ID: m.ID, RaftAddr: m.RaftAddr, HTTPAddr: m.HTTPAddr}); err != nil {
		a.writeClusterError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, m)
}

func (a *API) removeNode(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	ctx, cancel := context.WithTimeout(r.Context(), a.opts.RequestTimeout)
	defer cancel()
	if err := a.limiter.RemoveMember(ctx, id); err != nil {
		a.writeClusterError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]string{"removed": id})
}

func (a *API) healthz(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, http.StatusOK, map[string]string{"status": "ok"})
}

func (a *API) readyz(w http.ResponseWriter, _ *http.Request) {
	if !a.limiter.Ready() {
		writeJSON(w, http.StatusServiceUnavailable, map[string]string{"status": "not ready"})
		return
	}
	writeJSON(w, http.StatusOK, map[string]string{"status": "ready"})
}

// writeClusterError maps the cluster's sentinel errors to statuses: this is
// the one place where that mapping lives.
func (a *API) writeClusterError(w http.ResponseWriter, r *http.Request, err error) {
	writeError(w, a.clusterError(r, err))
}

// clusterError maps the cluster's errors to API errors: this is the one
// place where that mapping lives.
func (a *API) clusterError(r *http.Request, err error) *apiError {
	var rej *cluster.RejectedError
	var fe *algorithms.FieldError
	switch {
	case errors.Is(err, cluster.ErrKeyLimit):
		return &apiError{status: http.StatusServiceUnavailable, code: "unavailable", message: err.Error(), retryAfter: "1"}
	case errors.As(err, &rej) && errors.Is(err, cluster.ErrNotFound):
		return &apiError{status: http.StatusNotFound, code: "not_found", field: rej.Field, message: rej.Message}
	case errors.As(err, &rej):
		return invalid(rej.Field, "%s", rej.Message)
	case errors.Is(err, cluster.ErrInvalid):
		field := ""
		if errors.As(err, &fe) {
			field = fe.Field
		}
		return invalid(field, "%v", err)
	case errors.Is(err, cluster.ErrNotFound):
		return &apiError{status: http.StatusNotFound, code: "not_found", message: err.Error()}
	case errors.Is(err, cluster.ErrNoLeader), errors.Is(err, cluster.ErrOutcomeUnknown),
		errors.Is(err, cluster.ErrShutdown), errors.Is(err, context.DeadlineExceeded), errors.Is(err, context.Canceled):
		msg := "no leader could be reached in time; retry"
		if errors.Is(err, cluster.ErrOutcomeUnknown) {
			msg = "the outcome is unknown (the leader changed or did not answer in time); retry with the same request_id to be answered once"
		}
		return &apiError{status: http.StatusServiceUnavailable, code: "unavailable", message: msg, retryAfter: "1"}
	default:
		a.opts.Logger.Error("request failed", "path", r.URL.Path, "err", err)
		return &apiError{status: http.StatusInternalServerError, code: "internal", message: err.Error()}
	}
}

func writeError(w http.ResponseWriter, e *apiError) {
	if e.retryAfter != "" {
		w.Header().Set("Retry-After", e.retryAfter)
	}
	writeJSON(w, e.status, e.body())
}

// errorJSON is the body of every error answer.
type errorJSON struct {
	Error string `json:"error"`
	Code  string `json:"code"`
	Field string `json:"field,omitempty"`
}

func (e *apiError) body() errorJSON { return errorJSON{Error: e.message, Code: e.code, Field: e.field} }

func writeJSON(w http.ResponseWriter, status int, v any) {
	data, err := json.Marshal(v)
	if err != nil {
		status = http.StatusInternalServerError
		data = []byte(`{"error":"could not encode the response","code":"internal"}`)
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(append(data, '\n'))
}
