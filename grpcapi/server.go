package grpcapi

import (
	"context"
	"crypto/tls"
	"log/slog"
	"math"
	"math/rand/v2"
	"net"
	"time"

	ratelimitv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"github.com/limitnode/limitnode/auth"
	"github.com/limitnode/limitnode/rls"
	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/keepalive"
	"google.golang.org/grpc/reflection"
)

// Limiter is what the gRPC API needs of a node; *cluster.Node implements
// it.
type Limiter interface {
	// ShouldRateLimit decides a query; see cluster.Node.ShouldRateLimit
	// for its errors.
	ShouldRateLimit(ctx context.Context, q rls.Query) (rls.Decision, error)
	// Ready returns "" when the node can decide, else why not.
	Ready() string
}

// Bounds of the server.
const (
	// MaxRequestBytes bounds a request message: room for the most
	// descriptors a query may hold, each with the most and longest
	// entries.
	MaxRequestBytes = 256 << 10
	// MaxHeaderListBytes bounds a call's metadata, its HTTP/2 header list
	// as HTTP/2 counts it (each field's name and value, plus 32 bytes):
	// the HTTP API's 16 KiB. grpc-go's own default is 16 MiB, which a
	// client that needs no token (the health service) could hold on every
	// stream it keeps open.
	MaxHeaderListBytes = 16 << 10
	// MaxConcurrentStreams bounds the calls one connection may have in
	// flight (HTTP/2's SETTINGS_MAX_CONCURRENT_STREAMS): a client with
	// more waits for a place (grpc-go) or opens another connection
	// (Envoy). The streaming calls of all connections are capped apart
	// (see Options.MaxStreams).
	MaxConcurrentStreams = 256
	// DefaultRequestTimeout bounds how long a call waits for the cluster
	// when the caller set no earlier deadline.
	DefaultRequestTimeout = 5 * time.Second
	// streamWorkers is how many goroutines serve calls (more calls than
	// that at once get goroutines of their own, as without the pool).
	streamWorkers = 256
	// healthPollInterval is how often the health service's status follows
	// the node's readiness.
	healthPollInterval = 500 * time.Millisecond
)

// Options configure the server.
type Options struct {
	// Logger receives one record per call that failed with an internal
	// error. Default slog.Default().
	Logger *slog.Logger
	// RequestTimeout bounds how long a call waits for the cluster.
	// Default DefaultRequestTimeout.
	RequestTimeout time.Duration
	// TLS, when set, serves over TLS with this configuration (its
	// GetCertificate and ClientCAs included); nil serves plaintext.
	TLS *tls.Config
	// Authorizer, when set, makes calls need a bearer token with their
	// role (see the package documentation). Nil: every call is open.
	Authorizer auth.Authorizer
	// Jitter returns a uniformly random integer in [0, n]; it spreads the
	// Retry-After of denied clients. Default math/rand/v2.
	Jitter func(n int64) int64
	// MaxStreams and MaxStreamsPerClient cap the streaming calls (health
	// Watch, reflection) open at once, in all and per client address; one
	// more is refused with RESOURCE_EXHAUSTED. Defaults
	// DefaultMaxStreams and DefaultMaxStreamsPerClient.
	MaxStreams, MaxStreamsPerClient int
	// MaxCallsPerClient caps the calls of every kind under way at once
	// from one client address, counted from the moment their headers
	// arrive (a call whose message never comes is under way); one more is
	// refused with RESOURCE_EXHAUSTED. Default DefaultMaxCallsPerClient.
	MaxCallsPerClient int
	// Proven, when set, is called with the context of each call that
	// proves its caller, before the call runs: one to a method other than
	// the health service's that the token check let through. The node
	// uses it to let that connection idle for longer than one that has
	// proven nothing.
	Proven func(ctx context.Context)
	// Serving, when set, is called with the context of each call when its
	// headers arrive, and the done it returns once the call ends. The node
	// uses it to know which connections have calls under way: it never
	// closes one of those to make room for a new connection.
	Serving func(ctx context.Context) (done func())
}

// Server is the gRPC API over one node.
type Server struct {
	grpc    *grpc.Server
	health  *health.Server
	limiter Limiter
	opts    Options
	metrics *metrics
	streams *streamCaps // streaming calls
	calls   *streamCaps // calls of every kind, per client address
	stop    chan struct{}
	stopped chan struct{}
}

// New returns the gRPC API of the node behind limiter, its services
// registered. Serve it with Serve; stop it with Stop or GracefulStop.
func New(limiter Limiter, opts Options) *Server {
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	if opts.RequestTimeout <= 0 {
		opts.RequestTimeout = DefaultRequestTimeout
	}
	if opts.Jitter == nil {
		opts.Jitter = func(n int64) int64 { return rand.Int64N(n + 1) }
	}
	if opts.MaxStreams <= 0 {
		opts.MaxStreams = DefaultMaxStreams
	}
	if opts.MaxStreamsPerClient <= 0 {
		opts.MaxStreamsPerClient = DefaultMaxStreamsPerClient
	}
	if opts.MaxCallsPerClient <= 0 {
		opts.MaxCallsPerClient = DefaultMaxCallsPerClient
	}
	s := &Server{limiter: limiter, opts: opts, metrics: newMetrics(), health: health.NewServer(),
		streams: newStreamCaps("streams", opts.MaxStreams, opts.MaxStreamsPerClient),
		calls:   newStreamCaps("calls", math.MaxInt, opts.MaxCallsPerClient), stop: make(chan struct{}), stopped: make(chan struct{})}
	serverOpts := []grpc.ServerOption{
		grpc.MaxRecvMsgSize(MaxRequestBytes),
		grpc.MaxHeaderListSize(MaxHeaderListBytes),
		grpc.InTapHandle(s.tapCall),
		grpc.MaxConcurrentStreams(MaxConcurrentStreams),
		grpc.ConnectionTimeout(10 * time.Second),
		grpc.KeepaliveEnforcementPolicy(keepalive.EnforcementPolicy{MinTime: 10 * time.Second, PermitWithoutStream: true}),
		grpc.KeepaliveParams(keepalive.ServerParameters{MaxConnectionIdle: 5 * time.Minute}),
		// Calls run on a pool of long-lived goroutines, whose stacks have
		// grown already, instead of a new goroutine each: under a flood,
		// growing every call's stack cost a tenth of the CPU.
		grpc.NumStreamWorkers(streamWorkers),
		grpc.ChainUnaryInterceptor(s.authorizeUnary),
		grpc.ChainStreamInterceptor(s.authorizeStream, s.capStream),
	}
	if opts.TLS != nil {
		serverOpts = append(serverOpts, grpc.Creds(credentials.NewTLS(opts.TLS)))
	}
	s.grpc = grpc.NewServer(serverOpts...)
	ratelimitv3.RegisterRateLimitServiceServer(s.grpc, &rateLimitService{server: s})
	healthpb.RegisterHealthServer(s.grpc, s.health)
	reflection.Register(s.grpc)
	s.followReadiness()
	go s.watchReadiness()
	return s
}

// Serve accepts connections on ln until Stop or GracefulStop.
func (s *Server) Serve(ln net.Listener) error { return s.grpc.Serve(ln) }

// GracefulStop stops accepting connections and waits for the calls in
// flight to finish.
func (s *Server) GracefulStop() {
	s.stopWatching()
	s.grpc.GracefulStop()
}

// Stop closes every connection at once.
func (s *Server) Stop() {
	s.stopWatching()
	s.grpc.Stop()
}

// Collectors are the server's Prometheus metrics, for the node's
// /metrics.
func (s *Server) Collectors() []prometheus.Collector { return s.metrics.collectors() }

func (s *Server) stopWatching() {
	select {
	case <-s.stop:
	default:
		close(s.stop)
		<-s.stopped
		s.health.Shutdown()
	}
}

// watchReadiness keeps the health service's status in step with the
// node's readiness until the server stops.
func (s *Server) watchReadiness() {
	defer close(s.stopped)
	tick := time.NewTicker(healthPollInterval)
	defer tick.Stop()
	for {
		select {
		case <-s.stop:
			return
		case <-tick.C:
			s.followReadiness()
		}
	}
}

// followReadiness sets the status of the server ("") and of the rate limit
// service from the node's readiness.
func (s *Server) followReadiness() {
	status := healthpb.HealthCheckResponse_SERVING
	if s.limiter.Ready() != "" {
		status = healthpb.HealthCheckResponse_NOT_SERVING
	}
	s.health.SetServingStatus("", status)
	s.health.SetServingStatus(ratelimitv3.RateLimitService_ServiceDesc.ServiceName, status)
}
