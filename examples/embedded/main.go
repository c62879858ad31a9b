// Command embedded shows a service that is itself a member of the limit
// cluster: it opens a node, serves limitnode's HTTP API beside it, and
// checks a limit through the Go API.
//
//	go run ./examples/embedded -bootstrap       # the first replica
//	go run ./examples/embedded                  # again: it restarts into its cluster
package main

import (
	"context"
	"errors"
	"flag"
	"log"
	"net/http"
	"time"

	"github.com/limitnode/limitnode/algorithms"
	"github.com/limitnode/limitnode/cluster"
	"github.com/limitnode/limitnode/contract"
	"github.com/limitnode/limitnode/httpapi"
)

func main() {
	id := flag.String("id", "app-1", "this replica's node ID, unique and stable")
	raftAddr := flag.String("raft", "127.0.0.1:7171", "Raft address, reachable by the other replicas")
	httpAddr := flag.String("http", "127.0.0.1:7170", "where this replica serves the HTTP API")
	dataDir := flag.String("data", "limits-data", "data directory")
	bootstrap := flag.Bool("bootstrap", false, "start a new cluster (the first replica only; the others Join)")
	flag.Parse()

	node, err := cluster.Open(cluster.Config{
		ID: *id, RaftAddr: *raftAddr, HTTPAddr: *httpAddr, DataDir: *dataDir, Bootstrap: *bootstrap,
	})
	if err != nil {
		log.Fatal(err)
	}
	if !node.HadState() && !*bootstrap {
		// Without state and without Bootstrap, the node waits for a member
		// to add it: no decision could come before that.
		node.Close()
		log.Fatal("this node belongs to no cluster yet: start the first replica with -bootstrap, " +
			"and add each other one from a member (node.Join, POST /v1/cluster/join or limitnode join)")
	}
	defer node.Close() // hands leadership over first

	// Optional: serve the HTTP API too (followers forward to the leader either way).
	server := httpapi.NewServer(*httpAddr, httpapi.New(node, httpapi.Options{}))
	go func() {
		if err := server.ListenAndServe(); !errors.Is(err, http.ErrServerClosed) {
			log.Print(err)
		}
	}()
	defer server.Close()

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	perKey := algorithms.Limit{Rate: 100, Period: time.Minute, Burst: 100}
	d, err := node.Allow(ctx, contract.Request{
		Checks:    []contract.Check{{Key: "api-key:abc123", Limit: perKey, Cost: 1}},
		RequestID: "req-8f14e45f", // optional: makes a retry safe
	})
	switch {
	case errors.Is(err, contract.ErrInvalid): // a bad request: fix the caller
		log.Fatal(err)
	case errors.Is(err, contract.ErrNoLeader): // no quorum right now: fail open or closed
		log.Print("no leader: ", err)
	case errors.Is(err, contract.ErrOutcomeUnknown): // may have consumed: retry with the same RequestID
		log.Print("outcome unknown: ", err)
	case err != nil:
		log.Fatal(err)
	case !d.Allowed: // 429
		log.Printf("denied; retry in %v", d.Checks[0].RetryAfter)
	default:
		log.Printf("allowed; %d left", d.Checks[0].Remaining)
	}
}
