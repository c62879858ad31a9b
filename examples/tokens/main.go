// Command tokens streams a stand-in model's answer and charges each tenant
// for the tokens it sent, not the most it might have: every request
// reserves max_tokens of the tenant's budget before the first token, and
// settles with what it streamed, so what it did not use goes back to the
// tenant at once, and an answer cut short costs what it sent.
//
//	go run ./examples/tokens -listen 127.0.0.1:8092 127.0.0.1:7001 127.0.0.1:7002 127.0.0.1:7003
//	curl -N -H 'X-Tenant: acme' '127.0.0.1:8092/generate?prompt=hello+there'
package main

import (
	"context"
	"flag"
	"fmt"
	"log"
	"net"
	"net/http"
	"strings"
	"time"

	"github.com/limitnode/limitnode/client"
)

// maxTokens is the most one answer may stream, reserved up front.
const maxTokens = 256

var perTenant = &client.Limit{Rate: 10_000, Period: 24 * time.Hour} // tokens a day, a bucket of as many

func main() {
	listen := flag.String("listen", "127.0.0.1:8092", "address to serve on")
	flag.Parse()
	limiter := client.New(&http.Client{Timeout: 5 * time.Second}, flag.Args()...)

	http.HandleFunc("GET /generate", func(w http.ResponseWriter, r *http.Request) {
		tenant := r.Header.Get("X-Tenant")
		if tenant == "" {
			http.Error(w, "X-Tenant is required", http.StatusUnauthorized)
			return
		}
		cost := int64(maxTokens)
		res, err := limiter.StartSettlement(r.Context(), client.AllowRequest{Key: "tokens:" + tenant, Limit: perTenant, Cost: cost}, 2*time.Minute)
		switch {
		case err != nil:
			http.Error(w, "the limiter cannot answer", http.StatusServiceUnavailable)
			return
		case !res.Allowed:
			w.Header().Set("Retry-After", fmt.Sprint(int(res.RetryAfter.Seconds())))
			http.Error(w, "your token budget is spent", http.StatusTooManyRequests)
			return
		}
		sent := stream(w, r.URL.Query().Get("prompt"))
		// Settle even if the client went away: the tokens were made.
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if s, err := res.Settle(ctx, sent); err != nil {
			log.Printf("settle %s: %v", res.SettlementID, err)
		} else {
			log.Printf("tenant %s: reserved %d tokens, sent %d, %d given back", tenant, s.Upfront, sent, s.Refunded)
		}
	})
	ln, err := net.Listen("tcp", *listen) // with port 0, one the OS picks, named below
	if err != nil {
		log.Fatal(err)
	}
	log.Printf("serving on %s", ln.Addr())
	log.Fatal(http.Serve(ln, nil))
}

// stream writes the stand-in model's tokens, each flushed as it comes: the
// prompt's words echoed back, then "done", at most maxTokens; it stops
// early if the client goes away. It returns how many tokens it sent.
func stream(w http.ResponseWriter, prompt string) int64 {
	tokens := append(strings.Fields(prompt), "done")
	flusher, _ := w.(http.Flusher)
	var sent int64
	for _, tok := range tokens[:min(len(tokens), maxTokens)] {
		if _, err := fmt.Fprintln(w, tok); err != nil {
			break
		}
		if flusher != nil {
			flusher.Flush()
		}
		sent++
	}
	return sent
}
