// Command grpclimit is a gRPC server (here gRPC's own health service) whose
// calls are limited per API key by a limitnode cluster: each key may make
// 5 Check calls a minute, whichever replica it calls. Server reflection,
// which is not limited, lets grpcurl find the service.
//
//	go run ./examples/grpclimit -listen 127.0.0.1:9090 127.0.0.1:7001
//	grpcurl -plaintext -H 'x-api-key: key-1' 127.0.0.1:9090 grpc.health.v1.Health/Check
package main

import (
	"flag"
	"log"
	"net"
	"time"

	"github.com/limitnode/limitnode/client"
	"github.com/limitnode/limitnode/client/grpclimit"
	"google.golang.org/grpc"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/reflection"
)

func main() {
	listen := flag.String("listen", "127.0.0.1:9090", "address to serve on")
	flag.Parse()
	guard := client.NewGuard(client.New(nil, flag.Args()...), client.GuardOptions{OnFailure: client.FailClosed})

	limiter, err := grpclimit.New(guard, grpclimit.Options{
		Methods: map[string][]grpclimit.Check{
			"/grpc.health.v1.Health/Check": {{
				Key:   grpclimit.Join(grpclimit.Const("api-key"), grpclimit.Metadata("x-api-key")),
				Limit: &client.Limit{Rate: 5, Period: time.Minute},
			}},
		},
	})
	if err != nil {
		log.Fatal(err)
	}
	srv := grpc.NewServer(grpc.UnaryInterceptor(limiter.Unary()), grpc.StreamInterceptor(limiter.Stream()))
	healthpb.RegisterHealthServer(srv, health.NewServer())
	reflection.Register(srv)

	ln, err := net.Listen("tcp", *listen)
	if err != nil {
		log.Fatal(err)
	}
	log.Printf("serving gRPC on %s", ln.Addr())
	log.Fatal(srv.Serve(ln))
}
