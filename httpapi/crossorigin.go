package httpapi

import (
	"mime"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"strings"

	"github.com/limitnode/limitnode/auth"
)

// A browser sends some requests to any address a page names without asking
// the server first: a POST whose body is text/plain, form-encoded or
// untyped (fetch in no-cors mode, a form, a beacon), and a GET (an image).
// It cannot read the answer, but the request has done its work: a key's
// budget spent, a backup restored, the leader moved. Every other request
// from another origin needs a CORS preflight first, which limitnode never
// grants. So the node refuses what a browser marks as sent for a page of
// another origin, on every route that changes state: every method but GET
// and HEAD, and /v1/forward-auth whatever its method, since asking spends.
// It is net/http's CrossOriginProtection rule, applied to forward-auth's
// GET too, with answers that name the header at fault. Programs (curl, the
// clients, Envoy) send none of these headers and are not affected.
//
// A page can read an answer, though, when its own name resolves to the
// node's address (DNS rebinding): to the browser the node is then the
// page's own origin, and over plain HTTP to a name the browser marks a GET
// with neither Sec-Fetch-Site nor Origin, so the request looks like a
// program's; only its Host, the attacker's name, gives it away. With
// tokens on, such a page has no token to send. Without them, the node
// answers (but for the health checks) only requests that name it by its
// address or as localhost, and no request that a browser marks as sent
// for another site, whatever the route: a program that calls a node
// without tokens by a DNS name is refused too, and is told to use the
// address or turn tokens on. This is the rule of Jupyter's and Ollama's
// loopback servers and of geth's --http.vhosts (default localhost), for
// the same attack.

// Codes of the error body for a request a browser sent for a page that is
// not the node's own, and for a browser's body of the wrong type.
const (
	codeCrossOrigin          = "cross_origin"
	codeUnsupportedMediaType = "unsupported_media_type"
)

// changesState reports whether a request to the route may change the
// cluster's state, and so must not come from a page of another origin.
func changesState(route, method string) bool {
	return route == forwardAuthRoute || (method != http.MethodGet && method != http.MethodHead)
}

// fromBrowser reports whether r carries the headers every current browser
// adds to the requests that pages make: Sec-Fetch-Site (all since 2023), or
// Origin (on every cross-origin request but a GET or HEAD).
func fromBrowser(r *http.Request) bool {
	return r.Header.Get("Sec-Fetch-Site") != "" || r.Header.Get("Origin") != ""
}

// proxyHeaders are headers that proxies set on the forward-auth requests
// they send (nginx as configured, Caddy and Traefik always) and that a page
// cannot make a browser send without a preflight. A forward-auth request
// that carries one comes from a proxy, which copies the browser headers of
// the request it holds: those describe the proxy's client, not the caller.
var proxyHeaders = []string{"X-Forwarded-For", "X-Forwarded-Method", "X-Forwarded-Uri", "X-Forwarded-Host",
	"X-Forwarded-Proto", "X-Original-Uri", "X-Original-Method", "X-Real-Ip", "Forwarded"}

func fromProxy(r *http.Request) bool {
	for _, h := range proxyHeaders {
		if r.Header.Get(h) != "" {
			return true
		}
	}
	return false
}

// refuseCrossSite returns the 403 (code cross_origin) for a request to an
// endpoint of route with role that a page the node does not serve may have
// sent, or nil. Checked, on a route that changes state from a browser, and
// on every route but the health checks when the node has no tokens:
//   - Sec-Fetch-Site other than same-origin or none (none: the person typed
//     the address);
//   - no Sec-Fetch-Site (an older browser) and an Origin whose host:port is
//     not the request's Host.
//
// Neither is checked on a forward-auth request from a proxy (see
// proxyHeaders): those headers are the proxy's client's. And a Host that
// is a name other than localhost: a page whose own name an attacker points
// at the node's address (DNS rebinding) is, to the browser, the node's own
// origin, so only the name it uses gives it away. It is refused from a
// browser on a route that changes state, and from any caller, a proxy
// too, when the node has no tokens (a rebound page's GET cannot be told
// from a program's, and, being same-origin, it may add a proxy's headers).
func (a *API) refuseCrossSite(route string, role auth.Role, r *http.Request) *apiError {
	if role == open {
		return nil
	}
	tokens := a.opts.Authorizer != nil
	proxied := route == forwardAuthRoute && fromProxy(r)
	writeFromBrowser := changesState(route, r.Method) && fromBrowser(r) && !proxied
	if !writeFromBrowser && tokens {
		return nil
	}
	refuse := func(message string) *apiError {
		return &apiError{status: http.StatusForbidden, code: codeCrossOrigin, message: message}
	}
	what := r.Method + " " + route
	if !tokens && !writeFromBrowser {
		what += " without tokens"
	}
	site := r.Header.Get("Sec-Fetch-Site")
	switch {
	case proxied, site == "same-origin", site == "none":
	case site == "":
		if origin := r.Header.Get("Origin"); origin != "" && !sameHost(origin, r.Host) {
			return refuse("Origin " + origin + " is not this node (Host " + r.Host + "): " + what + " is refused from a page of another origin")
		}
	default:
		return refuse("Sec-Fetch-Site is " + site + ": a browser sent this request for a page of another origin, and " + what + " is refused from one")
	}
	if namesNodeByAddress(r.Host) {
		return nil
	}
	if writeFromBrowser {
		return refuse("Host " + r.Host + " is a name: from a browser, " + what + " must name the node by its address or localhost (a page of a name that resolves to the node must not write to it)")
	}
	return refuse("Host " + r.Host + " is a name, and this node has no tokens: it answers " + r.Method + " " + route +
		" only when named by its address or localhost, since a web page under a name that resolves to the node (DNS rebinding) would read the answer; call it by its address, or turn tokens on (-auth)")
}

// sameHost reports whether origin ("http://host:port") names host
// ("host:port", as in Host). The opaque origin "null" names nothing.
func sameHost(origin, host string) bool {
	u, err := url.Parse(origin)
	return err == nil && u.Host != "" && strings.EqualFold(u.Host, host)
}

// namesNodeByAddress reports whether a Host header names the node by an IP
// address or as localhost.
func namesNodeByAddress(host string) bool {
	if h, _, err := net.SplitHostPort(host); err == nil {
		host = h
	}
	host = strings.TrimSuffix(strings.TrimPrefix(host, "["), "]")
	if _, err := netip.ParseAddr(host); err == nil {
		return true
	}
	host = strings.ToLower(strings.TrimSuffix(host, "."))
	return host == "localhost" || strings.HasSuffix(host, ".localhost")
}

// refuseBrowserBody returns the 415 for a body that a browser sent with a
// Content-Type other than want ("application/json" also takes any
// "+json" type), or nil. A program's body is read whatever its type (a plain
// curl -d sends application/x-www-form-urlencoded); a browser's must say
// what it is, since the types a page may send without a preflight
// (text/plain, forms, none) are the ones refused.
func refuseBrowserBody(r *http.Request, want string) *apiError {
	if !fromBrowser(r) {
		return nil
	}
	got := r.Header.Get("Content-Type")
	media, _, err := mime.ParseMediaType(got)
	if err == nil && (media == want || (want == "application/json" && strings.HasSuffix(media, "+json"))) {
		return nil
	}
	return &apiError{status: http.StatusUnsupportedMediaType, code: codeUnsupportedMediaType,
		message: "Content-Type must be " + want + " for a request from a browser, not " + quoteOrNone(got)}
}

func quoteOrNone(s string) string {
	if s == "" {
		return "none"
	}
	return `"` + s + `"`
}
