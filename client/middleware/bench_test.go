package middleware_test

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/limitnode/limitnode/client"
	"github.com/limitnode/limitnode/client/middleware"
)

// BenchmarkOverhead compares a request through the middleware (a
// handler that writes a word, served in process) with the bare client call
// the middleware makes, against a stand-in for the cluster that answers
// every /v1/allow at once: the difference is what the middleware adds.
// Run with -benchtime and compare the two lines' ns/op.
func BenchmarkOverhead(b *testing.B) {
	cluster := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		h := w.Header()
		h.Set("Content-Type", "application/json")
		h.Set("RateLimit-Limit", "1000")
		h.Set("RateLimit-Remaining", "999")
		h.Set("RateLimit-Reset", "1")
		h.Set("RateLimit-Policy", `"default";q=1000;w=1`)
		h.Set("RateLimit", `"default";r=999;t=1`)
		_, _ = io.WriteString(w, `{"allowed":true,"limit":1000,"remaining":999,"reset_after_ms":1,"retry_after_ms":0}`+"\n")
	}))
	defer cluster.Close()
	c := client.New(nil, cluster.URL)
	guard := client.NewGuard(c, client.GuardOptions{})
	limit := &client.Limit{Rate: 1000}
	cost := int64(1)

	b.Run("client", func(b *testing.B) {
		req := client.AllowRequest{Checks: []client.Check{{Key: "user-1", Limit: limit, Cost: cost}}}
		for b.Loop() {
			if _, err := guard.Allow(context.Background(), req); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("middleware", func(b *testing.B) {
		l, err := middleware.New(guard, middleware.Options{Default: []middleware.Check{{Key: middleware.Header("X-User"), Limit: limit}}})
		if err != nil {
			b.Fatal(err)
		}
		h := l.Wrap(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { _, _ = io.WriteString(w, "ok") }))
		// One request, answered into a writer that keeps only the status:
		// the middleware copies what it changes, and the stand-ins cost
		// next to nothing, so the line measures the middleware and its call.
		r := httptest.NewRequest("GET", "/data", nil)
		r.Header.Set("X-User", "user-1")
		w := &statusWriter{header: http.Header{}}
		for b.Loop() {
			clear(w.header)
			w.status = 0
			h.ServeHTTP(w, r)
			if w.status != http.StatusOK {
				b.Fatalf("status %d", w.status)
			}
		}
	})
}

// statusWriter is a ResponseWriter that keeps the status and drops the body.
type statusWriter struct {
	header http.Header
	status int
}

func (w *statusWriter) Header() http.Header { return w.header }
func (w *statusWriter) WriteHeader(code int) {
	if w.status == 0 {
		w.status = code
	}
}
func (w *statusWriter) Write(p []byte) (int, error) {
	w.WriteHeader(http.StatusOK)
	return len(p), nil
}
