// Command reports is an expensive report endpoint behind a limitnode
// cluster: each client may ask for 10 reports a minute (bursts of 3), at
// most 5 reports are built at once across every replica of the service,
// and up to 20 more wait their turn for at most 10 s. Short bursts pass,
// the queue cannot grow without end, and when it is full a request is
// refused at once, with the time to come back.
//
//	go run ./examples/reports -listen 127.0.0.1:8090 127.0.0.1:7001 127.0.0.1:7002 127.0.0.1:7003
//	curl -H 'X-Client-ID: acme' 127.0.0.1:8090/report
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log"
	"math"
	"net"
	"net/http"
	"strconv"
	"time"

	"github.com/limitnode/limitnode/client"
)

var (
	perClient = &client.Limit{Algorithm: "token_bucket", Rate: 10, Period: time.Minute, Burst: 3}
	building  = client.LeaseRequest{Key: "reports:building", Max: 5, TTL: 30 * time.Second, MaxWait: 10 * time.Second, MaxQueue: 20}
)

func main() {
	listen := flag.String("listen", "127.0.0.1:8090", "address to serve on")
	buildTime := flag.Duration("build-time", 2*time.Second, "how long one report takes")
	flag.Parse()
	limiter := client.New(&http.Client{Timeout: 5 * time.Second}, flag.Args()...)

	http.HandleFunc("GET /report", func(w http.ResponseWriter, r *http.Request) {
		who := r.Header.Get("X-Client-ID")
		if who == "" {
			http.Error(w, "X-Client-ID is required", http.StatusUnauthorized)
			return
		}
		d, err := limiter.Allow(r.Context(), client.AllowRequest{Key: "reports:client:" + who, Limit: perClient})
		switch {
		case err != nil:
			http.Error(w, "the limiter cannot answer", http.StatusServiceUnavailable)
			return
		case !d.Allowed:
			refuse(w, http.StatusTooManyRequests, "your report quota is spent", d.RetryAfter)
			return
		}
		err = limiter.WithLease(r.Context(), building, func(ctx context.Context) error {
			select { // building the report
			case <-time.After(*buildTime):
				fmt.Fprintf(w, "report for %s\n", who)
				return nil
			case <-ctx.Done():
				return context.Cause(ctx)
			}
		})
		var busy *client.LeaseRefusedError
		switch {
		case errors.As(err, &busy):
			refuse(w, http.StatusServiceUnavailable, "all report builders are busy", busy.Lease.RetryAfter)
		case err != nil && r.Context().Err() == nil:
			http.Error(w, "the report was not built", http.StatusServiceUnavailable)
		}
	})
	ln, err := net.Listen("tcp", *listen) // with port 0, one the OS picks, named below
	if err != nil {
		log.Fatal(err)
	}
	log.Printf("serving on %s", ln.Addr())
	log.Fatal(http.Serve(ln, nil))
}

// refuse answers status with a Retry-After of at least a second.
func refuse(w http.ResponseWriter, status int, why string, retryAfter time.Duration) {
	w.Header().Set("Retry-After", strconv.Itoa(int(math.Ceil(max(retryAfter, time.Second).Seconds()))))
	http.Error(w, why, status)
}
