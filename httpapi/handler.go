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
	a := &API{limiter: limiter, opts: opts, mux: http.NewServeMux()}
	a.route("/v1/allow", map[string]http.HandlerFunc{http.MethodPost: a.allow})
	a.route("/v1/cluster", map[string]http.HandlerFunc{http.MethodGet: a.clusterStatus})
	a.route("/v1/cluster/join", map[string]http.HandlerFunc{http.MethodPost: a.join})
	a.route("/v1/cluster/nodes/{id}", map[string]http.HandlerFunc{http.MethodDelete: a.removeNode})
	a.route("/healthz", map[string]http.HandlerFunc{http.MethodGet: a.healthz})
	a.route("/readyz", map[string]http.HandlerFunc{http.MethodGet: a.readyz})
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
	a.mux.HandleFunc(path, func(w http.ResponseWriter, r *http.Request) {
		h, ok := byMethod[r.Method]
		if !ok {
			w.Header().Set("Allow", allow)
			writeError(w, &apiError{status: http.StatusMethodNotAllowed, code: "method_not_allowed",
				message: r.Method + " is not allowed on " + path + "; use " + allow})
			return
		}
		h(w, r)
	})
}

// ServeHTTP serves the API.
func (a *API) ServeHTTP(w http.ResponseWriter, r *http.Request) { a.mux.ServeHTTP(w, r) }

// allowResponse is the body of a /v1/allow answer.
type allowResponse struct {
	Allowed      bool            `json:"allowed"`
	Limit        int64           `json:"limit"`
	Remaining    int64           `json:"remaining"`
	ResetAfterMS int64           `json:"reset_after_ms"`
	RetryAfterMS int64           `json:"retry_after_ms"`
	Checks       []checkResponse `json:"checks,omitempty"`
}

type checkResponse struct {
	Key          string `json:"key"`
	Allowed      bool   `json:"allowed"`
	Limit        int64  `json:"limit"`
	Remaining    int64  `json:"remaining"`
	ResetAfterMS int64  `json:"reset_after_ms"`
	RetryAfterMS int64  `json:"retry_after_ms"`
}

func (a *API) allow(w http.ResponseWriter, r *http.Request) {
	var body allowJSON
	if err := decodeJSON(w, r, MaxBodyBytes, &body); err != nil {
		writeError(w, err)
		return
	}
	req, apiErr := body.toRequest()
	if apiErr != nil {
		writeError(w, apiErr)
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), a.opts.RequestTimeout)
	defer cancel()
	decision, err := a.limiter.Allow(ctx, req)
	if err != nil {
		a.writeClusterError(w, r, err)
		return
	}
	headline := mostRestrictive(decision)
	resp := allowResponse{
		Allowed:      decision.Allowed,
		Limit:        headline.Limit,
		Remaining:    headline.Remaining,
		ResetAfterMS: ceilDiv(headline.ResetAfterNanos, int64(time.Millisecond)),
		RetryAfterMS: ceilDiv(headline.RetryAfterNanos, int64(time.Millisecond)),
	}
	if len(req.Checks) > 1 {
		for i, d := range decision.Checks {
			resp.Checks = append(resp.Checks, checkResponse{
				Key: req.Checks[i].Key, Allowed: d.Allowed, Limit: d.Limit, Remaining: d.Remaining,
				ResetAfterMS: ceilDiv(d.ResetAfterNanos, int64(time.Millisecond)),
				RetryAfterMS: ceilDiv(d.RetryAfterNanos, int64(time.Millisecond)),
			})
		}
	}
	period := req.Checks[headlineIndex(decision)].Limit.PeriodNanos
	setRateLimitHeaders(w.Header(), "default", headline, period)
	status := http.StatusOK
	if !decision.Allowed {
		status = http.StatusTooManyRequests
		w.Header().Set("Retry-After", retryAfterHeader(resp.RetryAfterMS, a.opts.Jitter))
	}
	writeJSON(w, status, resp)
}

// headlineIndex picks the check whose numbers the response leads with and
// whose headers it sends: among denying checks the one that frees up last;
// if all allow, the one with the least remaining.
func headlineIndex(d cluster.Decision) int {
	best := 0
	for i, c := range d.Checks {
		b := d.Checks[best]
		switch {
		case !c.Allowed && b.Allowed:
			best = i
		case !c.Allowed && c.RetryAfterNanos > b.RetryAfterNanos:
			best = i
		case c.Allowed && b.Allowed && c.Remaining < b.Remaining:
			best = i
		}
	}
	return best
}

func mostRestrictive(d cluster.Decision) algorithms.Decision { return d.Checks[headlineIndex(d)] }

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
	var fe *algorithms.FieldError
	switch {
	case errors.Is(err, cluster.ErrInvalid):
		field := ""
		if errors.As(err, &fe) {
			field = fe.Field
		}
		writeError(w, invalid(field, "%v", err))
	case errors.Is(err, cluster.ErrNotFound):
		writeError(w, &apiError{status: http.StatusNotFound, code: "not_found", message: err.Error()})
	case errors.Is(err, cluster.ErrNoLeader), errors.Is(err, cluster.ErrOutcomeUnknown),
		errors.Is(err, cluster.ErrShutdown), errors.Is(err, context.DeadlineExceeded), errors.Is(err, context.Canceled):
		msg := "no leader could be reached in time; retry"
		if errors.Is(err, cluster.ErrOutcomeUnknown) {
			msg = "the outcome is unknown (the leader changed or did not answer in time); retry with the same request_id to be answered once"
		}
		w.Header().Set("Retry-After", "1")
		writeError(w, &apiError{status: http.StatusServiceUnavailable, code: "unavailable", message: msg})
	default:
		a.opts.Logger.Error("request failed", "path", r.URL.Path, "err", err)
		writeError(w, &apiError{status: http.StatusInternalServerError, code: "internal", message: err.Error()})
	}
}

func writeError(w http.ResponseWriter, e *apiError) {
	body := map[string]string{"error": e.message, "code": e.code}
	if e.field != "" {
		body["field"] = e.field
	}
	writeJSON(w, e.status, body)
}

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
