package httpapi

import (
	"context"
	"log/slog"
	"net/http"
	"time"
)

// accessLog wraps a route's handler to log each request at debug level:
// method, route (the registered pattern, not the path), status, duration and
// the leader whose entry decided it, when one did. Nothing is logged, and
// nothing measured, unless the logger is enabled for debug.
func (a *API) accessLog(route string, h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if !a.opts.Logger.Enabled(r.Context(), slog.LevelDebug) {
			h(w, r)
			return
		}
		start := time.Now()
		rec := &statusRecorder{ResponseWriter: w, status: http.StatusOK}
		h(rec, r)
		a.opts.Logger.LogAttrs(context.Background(), slog.LevelDebug, "http request",
			slog.String("method", r.Method), slog.String("route", route), slog.Int("status", rec.status),
			slog.Duration("duration", time.Since(start)), slog.String("remote", r.RemoteAddr),
			slog.String("decided_by", w.Header().Get("X-Limitnode-Leader")))
	}
}
