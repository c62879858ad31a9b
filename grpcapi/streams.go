package grpcapi

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"sync"

	"github.com/limitnode/limitnode/internal/clientip"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"
	"google.golang.org/grpc/tap"
)

// A streaming call (the health service's Watch, reflection) stays open for
// as long as its client likes, and costs the node about 12 KB while it
// does; the health service's are open to anyone. So the streams open at
// once are capped, in all and per client address, and one over a cap is
// refused at once with RESOURCE_EXHAUSTED. Unary calls are not counted
// here: they end within the request timeout, and MaxConcurrentStreams
// bounds those of one connection. But a call whose request message never
// comes waits on its stream as long as its client likes, so the calls of
// every kind under way from one client address are capped too
// (Options.MaxCallsPerClient), from the moment their headers arrive.

// Default caps on the streaming calls open at once.
const (
	// DefaultMaxStreams bounds them in all: about 12 MB of streams.
	DefaultMaxStreams = 1024
	// DefaultMaxStreamsPerClient bounds those of one client address (an
	// IPv6 address with its /64, see clientip.Group): a client watches a
	// service or two per connection, and one address cannot take the
	// whole of DefaultMaxStreams.
	DefaultMaxStreamsPerClient = 64
	// DefaultMaxCallsPerClient bounds the calls of every kind under way
	// from one client address: four connections' worth at
	// MaxConcurrentStreams, far above what a proxy keeps in flight (Envoy
	// gives up on a rate limit call after 20 ms by default), and at most
	// about 30 MB of stalled calls.
	DefaultMaxCallsPerClient = 4 * MaxConcurrentStreams
)

// streamCaps counts the calls (of the kind named what) open, in all and by
// client.
type streamCaps struct {
	what              string
	max, maxPerClient int

	mu        sync.Mutex
	open      int
	perClient map[netip.Addr]int
}

func newStreamCaps(what string, max, maxPerClient int) *streamCaps {
	return &streamCaps{what: what, max: max, maxPerClient: maxPerClient, perClient: map[netip.Addr]int{}}
}

// acquire takes a place for a stream of the call in ctx, returning how to
// give it back, or the RESOURCE_EXHAUSTED error of a stream over a cap.
func (c *streamCaps) acquire(ctx context.Context) (release func(), err error) {
	client, counted := streamClient(ctx)
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.open >= c.max {
		return nil, status.Error(codes.ResourceExhausted, fmt.Sprintf("this node has %d %s open, its cap: retry later", c.max, c.what))
	}
	if counted && c.perClient[client] >= c.maxPerClient {
		return nil, status.Error(codes.ResourceExhausted, fmt.Sprintf("your address has %d %s open, the cap per client: close one first", c.maxPerClient, c.what))
	}
	c.open++
	if counted {
		c.perClient[client]++
	}
	return func() {
		c.mu.Lock()
		defer c.mu.Unlock()
		c.open--
		if counted {
			if c.perClient[client]--; c.perClient[client] <= 0 {
				delete(c.perClient, client)
			}
		}
	}, nil
}

// streamClient is the client address a call counts against, when its peer
// is a TCP address.
func streamClient(ctx context.Context) (netip.Addr, bool) {
	p, ok := peer.FromContext(ctx)
	if !ok {
		return netip.Addr{}, false
	}
	tcp, ok := p.Addr.(*net.TCPAddr)
	if !ok {
		return netip.Addr{}, false
	}
	return clientip.Group(tcp.AddrPort().Addr()), true
}

// capStream is the stream interceptor that holds a place for each
// streaming call while it runs.
func (s *Server) capStream(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
	release, err := s.streams.acquire(ss.Context())
	if err != nil {
		return err
	}
	defer release()
	return handler(srv, ss)
}

// tapCall holds a place for each call among its client address's calls
// under way, from its headers to the end of its stream (grpc-go cancels
// the stream's context then, whatever ended it), and tells Options.Serving
// of it for as long. It runs before the call's message is read, under the
// connection's lock: it only counts.
func (s *Server) tapCall(ctx context.Context, _ *tap.Info) (context.Context, error) {
	release, err := s.calls.acquire(ctx)
	if err != nil {
		return nil, err
	}
	context.AfterFunc(ctx, release)
	if s.opts.Serving != nil {
		context.AfterFunc(ctx, s.opts.Serving(ctx))
	}
	return ctx, nil
}
