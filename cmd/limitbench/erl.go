package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	ratelimitcommon "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	ratelimitv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
)

// The erl targets measure envoyproxy/ratelimit, the reference rate limit
// service for Envoy, on its Redis backend: the service an Envoy user runs
// today. limitbench starts the binary -erl-binary names and a redis-server
// without persistence for each target and round, and stops both when the
// target is measured.

// erlSubdirectory is the runtime subdirectory the reference reads its
// configuration from: RUNTIME_ROOT/RUNTIME_SUBDIRECTORY/config/*.yaml.
const erlSubdirectory = "limitbench"

// erlLocalCacheBytes is the size of the reference's local cache of keys
// over their limit (LOCAL_CACHE_SIZE_IN_BYTES) for the -cache targets:
// 1 MiB, far more than the flood's floodKeys keys need. 0 turns it off.
const erlLocalCacheBytes = 1 << 20

// erlStartTimeout bounds how long the reference may take to answer its
// first call.
const erlStartTimeout = 30 * time.Second

// erlConfigPath is where writeERLConfig puts benchDomain under root.
func erlConfigPath(root string) string {
	return filepath.Join(root, erlSubdirectory, "config", benchDomainName+".yaml")
}

// writeERLConfig writes benchDomain where the reference's runtime loader
// reads it, with root as RUNTIME_ROOT.
func writeERLConfig(root string) error {
	path := erlConfigPath(root)
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return fmt.Errorf("create the configuration directory: %w", err)
	}
	if err := os.WriteFile(path, []byte(benchDomain), 0o644); err != nil {
		return fmt.Errorf("write the configuration: %w", err)
	}
	return nil
}

// erlSettings is how one reference service is run.
type erlSettings struct {
	grpcPort    int
	redisAddr   string
	runtimeRoot string
	localCache  bool
}

// env returns the reference's settings, which it reads from its
// environment only. It is the whole environment: a variable of the user's
// (a REDIS_URL, a STATSD_HOST) must not change the baseline. Every listener
// is on loopback; the HTTP and debug ports are 0 (any free port), since
// only gRPC is called; statsd is off, as limitnode sends no metrics during
// a run either; the configuration is read once, at start.
func (s erlSettings) env() []string {
	cache := 0
	if s.localCache {
		cache = erlLocalCacheBytes
	}
	return []string{
		"HOST=127.0.0.1", "PORT=0",
		"DEBUG_HOST=127.0.0.1", "DEBUG_PORT=0",
		"GRPC_HOST=127.0.0.1", "GRPC_PORT=" + strconv.Itoa(s.grpcPort),
		"REDIS_SOCKET_TYPE=tcp", "REDIS_URL=" + s.redisAddr,
		"USE_STATSD=false",
		"RUNTIME_ROOT=" + s.runtimeRoot, "RUNTIME_SUBDIRECTORY=" + erlSubdirectory, "RUNTIME_WATCH_ROOT=false",
		"LOCAL_CACHE_SIZE_IN_BYTES=" + strconv.Itoa(cache),
	}
}

// erlServer is a running reference service.
type erlServer struct {
	addr    string // its gRPC address
	dir     string // RUNTIME_ROOT, and its log
	cmd     *exec.Cmd
	exited  chan struct{}
	waitErr error // why it exited, once exited is closed
}

// startERL starts the reference service binary on the redis-server at
// redisAddr, and returns once it answers a call in benchDomain.
func startERL(binary, redisAddr string, localCache bool) (*erlServer, error) {
	dir, err := os.MkdirTemp("", "limitbench-erl-")
	if err != nil {
		return nil, err
	}
	s := &erlServer{dir: dir, exited: make(chan struct{})}
	if err := s.start(binary, redisAddr, localCache); err != nil {
		s.stop()
		return nil, err
	}
	return s, nil
}

func (s *erlServer) start(binary, redisAddr string, localCache bool) error {
	if err := writeERLConfig(s.dir); err != nil {
		return err
	}
	port, err := freePort()
	if err != nil {
		return err
	}
	s.addr = "127.0.0.1:" + strconv.Itoa(port)
	logFile, err := os.Create(filepath.Join(s.dir, "erl.log"))
	if err != nil {
		return err
	}
	defer logFile.Close()
	s.cmd = exec.Command(binary)
	s.cmd.Env = erlSettings{grpcPort: port, redisAddr: redisAddr, runtimeRoot: s.dir, localCache: localCache}.env()
	s.cmd.Dir, s.cmd.Stdout, s.cmd.Stderr = s.dir, logFile, logFile
	if err := s.cmd.Start(); err != nil {
		s.cmd = nil
		return fmt.Errorf("start %s: %w", binary, err)
	}
	go func() {
		s.waitErr = s.cmd.Wait()
		close(s.exited)
	}()
	if err := s.waitReady(); err != nil {
		return fmt.Errorf("%s: %w; its log ends:\n%s", binary, err, s.logTail())
	}
	return nil
}

// waitReady polls the service with one call in benchDomain until it
// decides it, it exits, or erlStartTimeout passes.
func (s *erlServer) waitReady() error {
	conn, err := grpc.NewClient(s.addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return err
	}
	defer conn.Close()
	client := ratelimitv3.NewRateLimitServiceClient(conn)
	probe := &ratelimitv3.RateLimitRequest{Domain: benchDomainName, Descriptors: []*ratelimitcommon.RateLimitDescriptor{
		{Entries: []*ratelimitcommon.RateLimitDescriptor_Entry{{Key: "client", Value: "limitbench-probe"}}},
	}}
	deadline := time.Now().Add(erlStartTimeout)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		resp, err := client.ShouldRateLimit(ctx, probe)
		cancel()
		if err == nil && resp.OverallCode == ratelimitv3.RateLimitResponse_OK {
			return nil
		}
		if err == nil {
			err = fmt.Errorf("overall code %s", resp.OverallCode)
		}
		select {
		case <-s.exited:
			return fmt.Errorf("exited before answering: %v", s.waitErr)
		case <-time.After(50 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("no answer in %s: %w", erlStartTimeout, err)
		}
	}
}

// logTail is the end of the service's log, for an error.
func (s *erlServer) logTail() string {
	data, err := os.ReadFile(filepath.Join(s.dir, "erl.log"))
	if err != nil {
		return err.Error()
	}
	const tailBytes = 2000
	if len(data) > tailBytes {
		data = data[len(data)-tailBytes:]
	}
	return strings.TrimSpace(string(data))
}

// stop ends the service and removes its files.
func (s *erlServer) stop() {
	if s.cmd != nil {
		_ = s.cmd.Process.Kill()
		<-s.exited
	}
	os.RemoveAll(s.dir)
}

// erlTarget is a grpcTarget on a reference service and redis-server of its
// own.
type erlTarget struct {
	*grpcTarget
	redis *redisServer
	srv   *erlServer
	conns []*grpc.ClientConn
	once  sync.Once
}

// erlTarget starts a redis-server and a reference service for the target
// called name (erl, erl-cache, erl-flood or erl-flood-cache) and connects
// connsPerAddr connections to the service.
func (e *environment) erlTarget(name string) (target, error) {
	redis, err := startRedis(e.opts.redisServer, false)
	if err != nil {
		return nil, err
	}
	srv, err := startERL(e.opts.erlBinary, redis.addr, strings.HasSuffix(name, "-cache"))
	if err != nil {
		redis.stop()
		return nil, err
	}
	t := &erlTarget{redis: redis, srv: srv}
	// The run stops a target once measured; this is for a run cut short.
	e.closers = append(e.closers, t.stop)
	var conns []grpc.ClientConnInterface
	for range connsPerAddr {
		c, err := grpc.NewClient(srv.addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
		if err != nil {
			t.stop()
			return nil, fmt.Errorf("dial %s: %w", srv.addr, err)
		}
		t.conns = append(t.conns, c)
		conns = append(conns, c)
	}
	load := loadOne
	if strings.HasPrefix(name, "erl-flood") {
		load = loadFlood
	}
	t.grpcTarget = newGRPCTarget(e, name, load, conns)
	return t, nil
}

// servers are the reference's service and its redis-server.
func (t *erlTarget) servers() []serverProcess {
	return []serverProcess{{Name: "ratelimit", PID: t.srv.cmd.Process.Pid}, {Name: "redis-server", PID: t.redis.cmd.Process.Pid}}
}

func (t *erlTarget) where() string { return whereProcesses }

// stop closes the connections and stops the service and its
// redis-server; it may be called again.
func (t *erlTarget) stop() {
	t.once.Do(func() {
		for _, c := range t.conns {
			_ = c.Close()
		}
		t.srv.stop()
		t.redis.stop()
	})
}
