package client_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/limitnode/limitnode/client"
)

// TestAnUnknownOutcomeIsItsOwnError: a 503 whose request may have been
// decided (outcome_unknown) is client.ErrOutcomeUnknown, so a caller knows
// to retry with the same request ID; a 503 for no leader is not.
func TestAnUnknownOutcomeIsItsOwnError(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, code string
		unknown    bool
	}{
		{"an unknown outcome", "outcome_unknown", true},
		{"no leader", "unavailable", false},
	}
	for _, tt := range tests {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			w.Header().Set("Retry-After", "1")
			w.WriteHeader(http.StatusServiceUnavailable)
			_, _ = w.Write([]byte(`{"error":"no answer in time","code":"` + tt.code + `"}`))
		}))
		c := client.New(nil, strings.TrimPrefix(srv.URL, "http://"))
		_, err := c.Allow(context.Background(), client.AllowRequest{Key: "k", Limit: &client.Limit{Rate: 1, Period: time.Second}, RequestID: "r-1"})
		srv.Close()
		if errors.Is(err, client.ErrOutcomeUnknown) != tt.unknown {
			t.Errorf("%s: %v, want ErrOutcomeUnknown %v", tt.name, err, tt.unknown)
		}
	}
}
