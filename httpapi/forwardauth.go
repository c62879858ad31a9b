package httpapi

import (
	"cmp"
	"fmt"
	"maps"
	"net/http"
	"net/netip"
	"path"
	"slices"
	"strconv"
	"strings"

	"github.com/limitnode/limitnode/contract"
	"github.com/limitnode/limitnode/internal/clientip"
)

// forwardAuthRoute is the path of the forward-auth endpoint.
const forwardAuthRoute = "/v1/forward-auth"

// forwardAuthMethods are the methods /v1/forward-auth answers: nginx,
// Caddy and Traefik ask with GET, but a proxy may ask with the method of
// the request it holds.
var forwardAuthMethods = []string{http.MethodGet, http.MethodPost, http.MethodPut, http.MethodPatch, http.MethodDelete, http.MethodOptions}

// DefaultTrustedProxies are the proxies /v1/forward-auth believes
// X-Forwarded-For from when Options.TrustedProxies is nil: loopback.
var DefaultTrustedProxies = []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8"), netip.MustParsePrefix("::1/128")}

// forwardAuth answers /v1/forward-auth?policy=NAME&dim.<name>=<source>
// [&cost=N][&deny_status=403][&request_id=header:<Name>] for a proxy
// (nginx auth_request, Traefik ForwardAuth, Caddy forward_auth) asking
// whether to pass on the request it holds: 200 when allowed, 429 (or
// deny_status) with Retry-After when denied, both with the rate-limit
// headers. Each dimension's value comes from a source: client_ip, method,
// host, uri (with its query), path (without, cleaned) or header:<Name>.
func (a *API) forwardAuth(w http.ResponseWriter, r *http.Request) {
	req, denyStatus, err := a.forwardAuthRequest(r)
	if err != nil {
		writeError(w, err)
		return
	}
	if decision, ok := a.decide(w, r, req, fromContract); ok {
		a.writeDecision(w, req, decision, denyStatus, true)
	}
}

// forwardAuthRequest reads the query: the request to decide and the status
// of a denial. Every error names the query parameter at fault.
func (a *API) forwardAuthRequest(r *http.Request) (contract.Request, int, *apiError) {
	q := r.URL.Query()
	for name, values := range q {
		known := name == "policy" || name == "cost" || name == "deny_status" || name == "request_id" || strings.HasPrefix(name, "dim.")
		switch {
		case !known:
			return contract.Request{}, 0, invalid(name, "unknown query parameter %q: give policy, dim.<name>, cost, deny_status or request_id", name)
		case len(values) != 1:
			return contract.Request{}, 0, invalid(name, "%s is given %d times", name, len(values))
		}
	}
	check := contract.Check{Policy: q.Get("policy"), Cost: 1}
	if err := contract.ValidatePolicyName(check.Policy); err != nil {
		return contract.Request{}, 0, invalid("policy", "%s", err.Message)
	}
	if s := q.Get("cost"); s != "" {
		cost, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			return contract.Request{}, 0, invalid("cost", "cost must be an integer, not %q", s)
		}
		setCost(&check, cost)
	}
	denyStatus := http.StatusTooManyRequests
	switch s := q.Get("deny_status"); s {
	case "", "429":
	case "401", "403":
		denyStatus, _ = strconv.Atoi(s)
	default:
		return contract.Request{}, 0, invalid("deny_status", "deny_status must be 429, 403 or 401, not %q", s)
	}
	for _, param := range slices.Sorted(maps.Keys(q)) {
		if !strings.HasPrefix(param, "dim.") {
			continue
		}
		value, err := a.forwardedValue(r, q.Get(param))
		if err != nil {
			return contract.Request{}, 0, invalid(param, "%s", err.Error())
		}
		check.Dimensions = append(check.Dimensions, contract.Dimension{Name: strings.TrimPrefix(param, "dim."), Value: value})
	}
	req := contract.Request{Checks: []contract.Check{check}}
	if source := q.Get("request_id"); source != "" {
		name, ok := strings.CutPrefix(source, "header:")
		if !ok || name == "" {
			return contract.Request{}, 0, invalid("request_id", "request_id must be header:<Name>, the header the proxy sets to its own request ID")
		}
		id, err := headerOf(r, name)
		if err != nil {
			return contract.Request{}, 0, invalid("request_id", "%s", err.Error())
		}
		req.RequestID = id
	}
	if err := req.Validate(); err != nil {
		field := err.Field
		if f, ok := strings.CutPrefix(field, checkField(0)+"."); ok {
			field = f
		}
		if strings.HasPrefix(field, "dimensions") {
			field = "dim"
		}
		e := *err
		e.Field = field
		return contract.Request{}, 0, fromContract(&e)
	}
	return req, denyStatus, nil
}

// forwardedValue reads a dimension's source from the proxied request as the
// proxy describes it.
func (a *API) forwardedValue(r *http.Request, source string) (string, error) {
	switch {
	case source == "client_ip":
		trusted := a.opts.TrustedProxies
		if trusted == nil {
			trusted = DefaultTrustedProxies
		}
		addr, err := clientip.Resolve(r.RemoteAddr, r.Header.Values("X-Forwarded-For"), trusted)
		if err != nil {
			return "", err
		}
		return addr.String(), nil
	case source == "method":
		return cmp.Or(r.Header.Get("X-Forwarded-Method"), r.Method), nil
	case source == "host":
		return cmp.Or(r.Header.Get("X-Forwarded-Host"), r.Host), nil
	case source == "uri" || source == "path":
		uri := cmp.Or(r.Header.Get("X-Forwarded-Uri"), r.Header.Get("X-Original-URI"))
		if uri == "" {
			return "", fmt.Errorf("source %s: the proxy sent neither X-Forwarded-Uri nor X-Original-URI", source)
		}
		if source == "uri" {
			return uri, nil
		}
		p, _, _ := strings.Cut(uri, "?")
		return path.Clean("/" + p), nil
	case strings.HasPrefix(source, "header:") && len(source) > len("header:"):
		return headerOf(r, strings.TrimPrefix(source, "header:"))
	}
	return "", fmt.Errorf("unknown source %q: give client_ip, method, host, uri, path or header:<Name>", source)
}

// strippedHeaders are the headers Go's server takes out of a request's
// Header (into its Host, TransferEncoding and Trailer): a source naming
// one would always read empty.
var strippedHeaders = []string{"Host", "Transfer-Encoding", "Trailer"}

// headerOf is header name of r; a header Go's server strips is an error
// that says so (and, for Host, names the source host).
func headerOf(r *http.Request, name string) (string, error) {
	for _, stripped := range strippedHeaders {
		if strings.EqualFold(name, stripped) {
			hint := ""
			if stripped == "Host" {
				hint = ": give host (X-Forwarded-Host, else Host)"
			}
			return "", fmt.Errorf("header:%s never reaches a handler, Go's server takes it out of the headers%s", name, hint)
		}
	}
	return r.Header.Get(name), nil
}
