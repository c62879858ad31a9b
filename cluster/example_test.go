package cluster_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/limitnode/limitnode/contract"

	"github.com/limitnode/limitnode/algorithms"
	"github.com/limitnode/limitnode/cluster"
)

// Embedding a node: a single-node cluster in this process, one limit
// checked three times.
func Example() {
	dir, _ := os.MkdirTemp("", "limitnode-example-")
	defer os.RemoveAll(dir)
	node, err := cluster.Open(cluster.Config{ID: "app-1", RaftAddr: "127.0.0.1:0", DataDir: dir, Bootstrap: true})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer node.Close()

	twoPerMinute := algorithms.Limit{Rate: 2, Period: time.Minute, Burst: 2}
	for range 3 {
		d, err := node.Allow(context.Background(), contract.Request{
			Checks: []contract.Check{{Key: "api-key:abc123", Limit: twoPerMinute, Cost: 1}},
		})
		switch {
		case errors.Is(err, contract.ErrNoLeader), errors.Is(err, contract.ErrOutcomeUnknown):
			fmt.Println("the cluster cannot decide now:", err)
		case err != nil:
			fmt.Println("bad request:", err)
		default:
			fmt.Println("allowed:", d.Allowed, "remaining:", d.Checks[0].Remaining)
		}
	}
	// Output:
	// allowed: true remaining: 1
	// allowed: true remaining: 0
	// allowed: false remaining: 0
}
