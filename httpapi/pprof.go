package httpapi

import (
	"context"
	"net/http"
	"net/http/pprof"
	"strconv"
	"strings"
	"time"
)

// pprofRoute serves Go's profiles (net/http/pprof) under /debug/pprof/,
// for the admin role, when Options.Profiling is set.
const pprofRoute = "/debug/pprof/"

// maxProfileSeconds bounds the seconds of a CPU profile or an execution
// trace: one request cannot keep the profiler, or a connection, for longer.
const maxProfileSeconds = 120

// profileWriteSlack is added to a profile's seconds for its write deadline,
// which the server's WriteTimeout would otherwise cut short.
const profileWriteSlack = 10 * time.Second

// serveProfile answers /debug/pprof/ (the index), /debug/pprof/NAME (a
// profile such as heap, goroutine, mutex), cmdline, symbol, and profile
// and trace, which take ?seconds=N (1 to maxProfileSeconds).
func (a *API) serveProfile(w http.ResponseWriter, r *http.Request) {
	switch name := strings.TrimPrefix(r.URL.Path, pprofRoute); name {
	case "cmdline":
		pprof.Cmdline(w, r)
	case "symbol":
		pprof.Symbol(w, r)
	case "profile", "trace":
		seconds := 30 // pprof's defaults
		if name == "trace" {
			seconds = 1
		}
		if s := r.URL.Query().Get("seconds"); s != "" {
			n, err := strconv.Atoi(s)
			if err != nil || n < 1 || n > maxProfileSeconds {
				writeError(w, invalid("seconds", "seconds must be an integer from 1 to %d", maxProfileSeconds))
				return
			}
			seconds = n
		}
		// The server's WriteTimeout would end a profile longer than it:
		// this response gets its own deadline, and pprof, which refuses a
		// profile longer than the server's WriteTimeout, is shown none.
		_ = http.NewResponseController(w).SetWriteDeadline(time.Now().Add(time.Duration(seconds)*time.Second + profileWriteSlack))
		q := r.URL.Query()
		q.Set("seconds", strconv.Itoa(seconds))
		r = r.WithContext(context.WithValue(r.Context(), http.ServerContextKey, &http.Server{}))
		r.URL.RawQuery = q.Encode()
		if name == "trace" {
			pprof.Trace(w, r)
		} else {
			pprof.Profile(w, r)
		}
	default:
		pprof.Index(w, r)
	}
}
