package main

import (
	"context"
	"errors"
	"io/fs"
	"net"
	"os"
	"strings"
	"testing"

	"github.com/limitnode/limitnode/client"
	"github.com/limitnode/limitnode/internal/testenv"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
)

// TestTheNodeTellsWhatItBound runs the binary with port 0 for each of its
// listeners, as a script would: its first log line (it has no warning to
// give first) names the ports the OS picked, its -addr-file holds them (and the addresses it advertises), each
// serves there (HTTP, gRPC, and Raft as /v1/cluster names it), and the
// file is gone once the node has stopped.
func TestTheNodeTellsWhatItBound(t *testing.T) {
	t.Parallel()
	testenv.NeedPrograms(t, "go")
	n := startBinary(t, "-id", "n1", "-http", "127.0.0.1:0", "-raft", "127.0.0.1:0", "-grpc", "127.0.0.1:0", "-data", t.TempDir())
	a := n.addrs
	for name, addr := range map[string]string{"http": a.HTTP, "raft": a.Raft, "grpc": a.GRPC} {
		if host, port, err := net.SplitHostPort(addr); err != nil || host != "127.0.0.1" || port == "0" {
			t.Fatalf("-addr-file's %s is %q, want 127.0.0.1 with the port picked", name, addr)
		}
	}
	if a.AdvertisedHTTP != a.HTTP || a.AdvertisedRaft != a.Raft {
		t.Fatalf("-addr-file advertises %s and %s, want what it listens on, %s and %s", a.AdvertisedHTTP, a.AdvertisedRaft, a.HTTP, a.Raft)
	}
	first, _, _ := strings.Cut(n.out.String(), "\n")
	if want := `msg=listening http=` + a.HTTP + ` raft=` + a.Raft + ` grpc=` + a.GRPC; !strings.Contains(first, want) {
		t.Fatalf("the first log line is %q, want it to hold %q", first, want)
	}

	ctx := context.Background()
	c := client.New(nil, a.HTTP)
	testenv.WaitFor(t, "the node to lead", func() bool { st, err := c.Cluster(ctx); return err == nil && st.Leader == "n1" })
	if st, err := c.Cluster(ctx); err != nil || st.SelfRaftAddr != a.AdvertisedRaft {
		t.Fatalf("/v1/cluster names the Raft address %q (%v), the -addr-file %s", st.SelfRaftAddr, err, a.AdvertisedRaft)
	}
	conn, err := grpc.NewClient(a.GRPC, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	testenv.WaitFor(t, "gRPC health at "+a.GRPC+" to say SERVING", func() bool {
		resp, err := healthpb.NewHealthClient(conn).Check(ctx, &healthpb.HealthCheckRequest{})
		if err != nil {
			t.Fatalf("gRPC health at %s: %v", a.GRPC, err)
		}
		return resp.Status == healthpb.HealthCheckResponse_SERVING
	})

	n.stop()
	if n.err != nil {
		t.Fatalf("the node stopped with %v\n%s", n.err, n.out.String())
	}
	if _, err := os.Stat(n.addrFile); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("the stopped node left its -addr-file behind (%v)", err)
	}
}
