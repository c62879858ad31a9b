// Command guard asks a limitnode cluster for a decision through
// client.Guard, which says what happens when the cluster cannot answer.
//
//	go run ./examples/guard 127.0.0.1:7001 127.0.0.1:7002 127.0.0.1:7003
package main

import (
	"context"
	"flag"
	"log"
	"time"

	"github.com/limitnode/limitnode/client"
)

func main() {
	flag.Parse()
	addrs := flag.Args() // tried in turn when one is down
	if len(addrs) == 0 {
		addrs = []string{"127.0.0.1:7070"}
	}
	c := client.New(nil, addrs...)
	g := client.NewGuard(c, client.GuardOptions{OnFailure: client.FailLocal, Replicas: 3})

	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	d, err := g.Allow(ctx, client.AllowRequest{Key: "api-key:abc123", Limit: &client.Limit{Rate: 100, Period: time.Minute}})
	if err != nil { // only for a request the API refused as invalid (4xx)
		log.Fatal(err)
	}
	if d.Degraded { // the failure policy answered; d.Cause says why
		log.Print("the cluster could not decide: ", d.Cause)
	}
	log.Printf("allowed: %v, remaining: %d", d.Allowed, d.Remaining)
}
