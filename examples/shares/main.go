// Command shares admits a hot key from the Go client's local shares: of
// 1,000 requests of one key, all but the first few are answered in
// process, from shares of the key's budget the client takes from the
// cluster, and what the client did not spend goes back as it closes.
//
//	go run ./examples/shares 127.0.0.1:7001 127.0.0.1:7002 127.0.0.1:7003
package main

import (
	"context"
	"fmt"
	"log"
	"os"
	"time"

	"github.com/limitnode/limitnode/client"
)

func main() {
	addrs := os.Args[1:]
	if len(addrs) == 0 {
		addrs = []string{"127.0.0.1:7070"}
	}
	ctx := context.Background()
	c := client.NewWithOptions(client.Options{LocalShares: true}, addrs...)
	hot := client.AllowRequest{Key: "tenant:42", Limit: &client.Limit{Rate: 100000, Period: time.Second, LocalShares: &client.LocalShares{}}}
	admitted, shared := 0, 0
	for range 1000 {
		d, err := c.Allow(ctx, hot)
		if err != nil {
			log.Fatal(err)
		}
		if d.Allowed {
			admitted++
		}
		if d.Shared {
			shared++
		}
	}
	if err := c.Close(ctx); err != nil {
		log.Fatal(err)
	}
	fmt.Printf("admitted %d of 1000; most from the client's shares: %v\n", admitted, shared > 500)
}
