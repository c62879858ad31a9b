package main

import (
	"bytes"
	"cmp"
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/limitnode/limitnode/auth"
	"github.com/limitnode/limitnode/contract"

	"github.com/limitnode/limitnode/algorithms"
	"github.com/limitnode/limitnode/cluster"
	"github.com/limitnode/limitnode/testcluster"
)

// benchTB lets testcluster start clusters outside a test: temporary
// directories and clean-ups are kept until close; a fatal error panics.
type benchTB struct {
	dirs     []string
	cleanups []func()
}

func (b *benchTB) Helper()                           {}
func (b *benchTB) Logf(string, ...any)               {}
func (b *benchTB) Fatalf(format string, args ...any) { panic(fmt.Sprintf(format, args...)) }
func (b *benchTB) Cleanup(f func())                  { b.cleanups = append(b.cleanups, f) }
func (b *benchTB) TempDir() string {
	dir, err := os.MkdirTemp("", "limitbench-")
	if err != nil {
		panic(err)
	}
	b.dirs = append(b.dirs, dir)
	return dir
}

func (b *benchTB) close() {
	for _, f := range slices.Backward(b.cleanups) {
		f()
	}
	for _, d := range b.dirs {
		os.RemoveAll(d)
	}
}

var _ testcluster.TB = (*benchTB)(nil)

// environment starts what the targets need, once, and stops it at the end.
type environment struct {
	opts     options
	http     *http.Client
	tbs      []*benchTB
	closers  []func()
	clusters map[string]*testcluster.Cluster
	// processes is the binary's cluster, once started (netCluster).
	processes   *processCluster
	builtBinary string
	redis       map[string]*redisServer
	trivial     string
	zipf        zipfKeySet
}

func newEnvironment(o options) *environment {
	return &environment{
		opts: o,
		http: &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{
			MaxIdleConns: 1024, MaxIdleConnsPerHost: 512, IdleConnTimeout: time.Minute,
			// For the https target: HTTP/1.1 with keep-alive, as http.
			TLSClientConfig: &tls.Config{MinVersion: tls.VersionTLS12, RootCAs: testcluster.CAs()},
		}},
		clusters: map[string]*testcluster.Cluster{},
		redis:    map[string]*redisServer{},
	}
}

// close stops every cluster and server the targets started; it may be
// called again.
func (e *environment) close() {
	for _, f := range slices.Backward(e.closers) {
		f()
	}
	for _, tb := range e.tbs {
		tb.close()
	}
	e.closers, e.tbs, e.clusters = nil, nil, map[string]*testcluster.Cluster{}
}

// cluster returns a 3-node cluster: "limitnode" with group commit,
// "limitnode-secure" the same with mutual TLS between the nodes, HTTPS and
// tokens, "limitnode-nostats" without the decision statistics,
// "limitnode-nofast" with every denial appended to the log, or "raft" with
// one Raft Apply per request.
func (e *environment) cluster(kind string) *testcluster.Cluster {
	if c := e.clusters[kind]; c != nil {
		return c
	}
	tb := &benchTB{}
	e.tbs = append(e.tbs, tb)
	c := testcluster.Start(tb, 3, testcluster.Options{Secure: kind == "limitnode-secure", Configure: func(cfg *cluster.Config) {
		cfg.NoSync = e.opts.noSync
		cfg.NoStats = kind == "limitnode-nostats"
		cfg.NoFastDenials = kind == "limitnode-nofast"
		cfg.MaxKeys = -1
		cfg.MaxEntriesInFlight = e.opts.inFlight
		if kind == "raft" {
			cfg.MaxBatchRequests = 1
			cfg.MaxEntriesInFlight = 4096
		}
	}})
	e.clusters[kind] = c
	if kind == "limitnode" && e.opts.preload > 0 {
		if err := e.preloadHTTP(c.WaitLeader().URL()); err != nil {
			panic(err)
		}
	}
	return c
}

// viaInProcess is via for the targets that call nodes through the Go API.
func (e *environment) viaInProcess(c *testcluster.Cluster) []*testcluster.Node {
	switch e.opts.via {
	case "leader":
		return []*testcluster.Node{c.WaitLeader()}
	case "follower":
		return c.Followers()[:1]
	}
	return c.Nodes
}

// A limit no benchmark request is denied by: what is measured is the cost
// of deciding, not of refusing.
var benchLimit = algorithms.Limit{Rate: 1_000_000_000, Period: time.Second, Burst: 1_000_000_000}

const benchLimitJSON = `{"rate":1000000000,"period":"1s","burst":1000000000}`

// The flood: callers hammer floodKeys hot keys limited to floodRate a
// second each, so nearly every answer is a denial: what a rate limiter
// exists for.
const (
	floodKeys      = 8
	floodRate      = 100
	floodLimitJSON = `{"rate":100,"period":"1s"}`
)

// floodKey is the hot key a caller floods.
func floodKey(caller int) string { return "flood-" + strconv.Itoa(caller%floodKeys) }

// hotKey is the one key of -keys hot and of the -hot targets.
const hotKey = "hot"

// key returns the key of a caller's seq-th request.
func (e *environment) key(caller, seq int) string {
	if e.opts.keys == "hot" {
		return hotKey
	}
	return fmt.Sprintf("k-%d-%d", caller, seq%1000)
}

// target returns the target called name, starting what it needs.
func (e *environment) target(name string) (target, error) {
	switch {
	case name == "trivial":
		return e.trivialTarget()
	case strings.HasPrefix(name, "grpc"):
		return e.grpcTarget(name)
	case strings.HasPrefix(name, "erl"):
		return e.erlTarget(name)
	case strings.HasPrefix(name, "embedded") || name == "raft":
		return e.embeddedTarget(name)
	case strings.HasPrefix(name, "redis"):
		return e.redisTarget(name)
	case strings.HasPrefix(name, "client"):
		return e.clientTarget(name)
	}
	return e.httpTarget(name)
}

// httpTarget returns one of the targets that call the cluster's HTTP API.
func (e *environment) httpTarget(name string) (target, error) {
	if !slices.Contains(httpTargetNames, name) {
		return nil, fmt.Errorf("unknown target %q", name)
	}
	kind := map[string]string{"http-nostats": "limitnode-nostats", "https": "limitnode-secure", "http-flood-nofast": "limitnode-nofast"}[name]
	c, err := e.netCluster(cmp.Or(kind, "limitnode"))
	if err != nil {
		return nil, err
	}
	nodes, err := e.via(c)
	if err != nil {
		return nil, err
	}
	t := &httpTarget{env: e, kind: name, urls: urls(nodes), cluster: c}
	switch name {
	case "http", "http-multi", "http-batch", "http-shares", "zipf", "zipf-shares":
	case "http-hot", "http-hot-shares":
		t.kind, t.label, t.hot = strings.Replace(name, "-hot", "", 1), name, true
	case "http-flood", "http-flood-nofast":
		// The flood comes through every node.
		t.kind, t.label, t.urls = "flood", name, urls(c.members())
	case "http-nostats":
		t.kind, t.label = "http", name
	case "https":
		t.kind, t.label, t.token = "http", name, testcluster.Token(auth.RoleDecide)
	case "http-flooded":
		t.kind, t.label = "http", name
		stop := make(chan struct{})
		var wg sync.WaitGroup
		all := urls(c.members())
		for w := range floodWorkers {
			wg.Go(func() { e.floodBatches(all[w%len(all)], w, stop) })
		}
		t.stopFn = func() { close(stop); wg.Wait() }
	case "http-snapshotting":
		t.kind, t.label, t.urls = "http", name, urls(c.members())
		t.windows, t.stopFn = e.snapshotEvery(e.cluster("limitnode"))
	}
	return t, nil
}

// httpTargetNames are the targets httpTarget knows.
var httpTargetNames = []string{"http", "http-multi", "http-batch", "http-shares", "zipf", "zipf-shares", "http-hot", "http-hot-shares",
	"http-flood", "http-flood-nofast", "http-nostats", "https", "http-flooded", "http-snapshotting"}

// snapshotEvery makes the nodes of c take turns to start a snapshot every
// snapshotEvery, as Raft's own thresholds would, until the returned stop
// is called; the windows say when they ran.
func (e *environment) snapshotEvery(c *testcluster.Cluster) (*snapshotWindows, func()) {
	stop := make(chan struct{})
	done := make(chan struct{})
	snaps := &snapshotWindows{}
	go func() {
		defer close(done)
		for i := 0; ; i++ {
			start := time.Now()
			snaps.begin(start)
			_ = c.Nodes[i%len(c.Nodes)].Node().Snapshot()
			snaps.end(time.Now())
			select {
			case <-stop:
				return
			case <-time.After(time.Until(start.Add(snapshotEvery))):
			}
		}
	}()
	return snaps, func() { close(stop); <-done }
}

// grpcTarget returns one of the targets that call the cluster's gRPC API
// (Envoy's rate limit service), with its load's domain stored.
func (e *environment) grpcTarget(name string) (target, error) {
	load, ok := map[string]rlsLoad{"grpc": loadOne, "grpc-multi": loadTwo, "grpc-flood": loadFlood, "grpc-secure": loadOne,
		"grpc-hot": loadHot, "grpc-hot-shares": loadHotShared}[name]
	if !ok {
		return nil, fmt.Errorf("unknown target %q", name)
	}
	kind := map[string]string{"grpc-secure": "limitnode-secure"}[name]
	c, err := e.netCluster(cmp.Or(kind, "limitnode"))
	if err != nil {
		return nil, err
	}
	domain := map[string]string{benchDomainName: benchDomain, benchHotDomainName: benchHotDomain}[load.domain()]
	if err := c.putRLSDomain(load.domain(), domain); err != nil {
		return nil, err
	}
	nodes, err := e.via(c)
	if err != nil {
		return nil, err
	}
	if load == loadFlood {
		nodes = c.members() // as http-flood: the flood comes through every node
	}
	t := newGRPCTarget(e, name, load, dialNodes(nodes))
	t.cluster = c
	return t, nil
}

// embeddedTarget returns one of the targets that call nodes through the
// Go API, in this process whatever -in-process says: an embedding program
// runs its nodes in its own process.
func (e *environment) embeddedTarget(name string) (target, error) {
	switch name {
	case "embedded", "embedded-nostats", "raft", "embedded-shares", "embedded-zipf", "embedded-zipf-shares":
	default:
		return nil, fmt.Errorf("unknown target %q", name)
	}
	kind := map[string]string{"embedded-nostats": "limitnode-nostats", "raft": "raft"}[name]
	t := &embeddedTarget{env: e, label: name, nodes: e.viaInProcess(e.cluster(cmp.Or(kind, "limitnode")))}
	if strings.HasSuffix(name, "-shares") {
		t.shares = benchShares
	}
	t.zipf = strings.HasPrefix(name, "embedded-zipf")
	return t, nil
}

// redisTarget returns a Redis + Lua target on a redis-server of its own.
func (e *environment) redisTarget(name string) (target, error) {
	if name != "redis" && name != "redis-aof" && name != "redis-flood" {
		return nil, fmt.Errorf("unknown target %q", name)
	}
	srv, err := startRedis(e.opts.redisServer, name == "redis-aof")
	if err != nil {
		return nil, err
	}
	e.closers = append(e.closers, srv.stop)
	return &redisTarget{env: e, label: name, srv: srv, conns: map[int]*redisConn{}, flood: name == "redis-flood"}, nil
}

// clientTarget returns one of the targets that call through the Go client.
func (e *environment) clientTarget(name string) (target, error) {
	if name != "client" && name != "client-coalesced" && name != "client-shares" {
		return nil, fmt.Errorf("unknown target %q", name)
	}
	c, err := e.netCluster("limitnode")
	if err != nil {
		return nil, err
	}
	nodes, err := e.via(c)
	if err != nil {
		return nil, err
	}
	return newClientTarget(e, name, c, urls(nodes)), nil
}

// trivialTarget serves a fixed answer the size of a real one: the most any
// HTTP service can do on this machine with this client.
func (e *environment) trivialTarget() (target, error) {
	if e.trivial == "" {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, err
		}
		body := []byte(`{"allowed":true,"limit":1000000000,"remaining":999999999,"reset_after_ms":1,"retry_after_ms":0}` + "\n")
		srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			_, _ = io.Copy(io.Discard, r.Body)
			w.Header().Set("Content-Type", "application/json")
			w.Header().Set("RateLimit-Limit", "1000000000")
			_, _ = w.Write(body)
		})}
		go func() { _ = srv.Serve(ln) }()
		e.closers = append(e.closers, func() { srv.Close() })
		e.trivial = "http://" + ln.Addr().String()
	}
	return &httpTarget{env: e, kind: "trivial", urls: []string{e.trivial}}, nil
}

// servers are the cluster's processes, or limitbench itself for trivial.
func (t *httpTarget) servers() []serverProcess {
	if t.cluster == nil {
		return []serverProcess{selfProcess("limitbench (the handler and the load)")}
	}
	return t.cluster.servers()
}

// metricsNodes are the cluster's nodes; trivial has none.
func (t *httpTarget) metricsNodes() []metricsNode {
	if t.cluster == nil {
		return nil
	}
	return metricsNodesOf(t.cluster)
}

func (t *httpTarget) where() string {
	if t.cluster == nil {
		return whereInProcess
	}
	return t.cluster.where()
}

type httpTarget struct {
	env   *environment
	kind  string
	label string // the name in the results, if not kind
	urls  []string
	// cluster is the cluster the urls are of; nil for trivial.
	cluster netCluster
	// hot sends every request to the one hot key, whatever -keys says.
	hot bool
	// stopFn, if set, ends what the target runs beside the requests.
	stopFn func()
	// windows, if set, are the snapshots taken meanwhile: only calls that
	// overlap one count towards the latencies.
	windows *snapshotWindows
	// token, if set, is sent as the bearer token (the https target).
	token string
	tally outcomeTally
}

func (t *httpTarget) outcomes() *outcomeTally { return &t.tally }

// snapshotEvery is how often http-snapshotting starts a snapshot.
const snapshotEvery = 2 * time.Second

// snapshotWindows records when snapshots ran.
type snapshotWindows struct {
	mu      sync.Mutex
	spans   [][2]time.Time
	running time.Time // start of the snapshot under way, or zero
}

func (w *snapshotWindows) begin(start time.Time) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.running = start
}

func (w *snapshotWindows) end(at time.Time) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.spans = append(w.spans, [2]time.Time{w.running, at})
	w.running = time.Time{}
}

// overlaps reports whether [from, to] overlaps a snapshot, counting one
// still under way as running until now.
func (w *snapshotWindows) overlaps(from, to time.Time) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	spans := w.spans
	if !w.running.IsZero() {
		spans = append(spans[:len(spans):len(spans)], [2]time.Time{w.running, time.Now()})
	}
	for _, s := range spans {
		if from.Before(s[1]) && to.After(s[0]) {
			return true
		}
	}
	return false
}

// latencyFilter returns the snapshot windows' overlaps, for measure.
func (t *httpTarget) latencyFilter() func(from, to time.Time) bool {
	if t.windows == nil {
		return nil
	}
	return t.windows.overlaps
}

func (t *httpTarget) stop() {
	if t.stopFn != nil {
		t.stopFn()
	}
}

func (t *httpTarget) name() string {
	if t.label != "" {
		return t.label
	}
	return t.kind
}

func (t *httpTarget) do(ctx context.Context, caller, seq int) (int, error) {
	url := t.urls[caller%len(t.urls)]
	key := t.env.key(caller, seq)
	if t.hot {
		key = hotKey
	}
	var body string
	decisions := 1
	switch t.kind {
	case "http", "trivial":
		url += "/v1/allow"
		body = `{"key":"` + key + `","limit":` + benchLimitJSON + `}`
	case "http-shares":
		url += "/v1/allow"
		body = `{"key":"` + key + `","limit":` + benchSharedLimitJSON + `}`
	case "zipf", "zipf-shares":
		url += "/v1/allow"
		limit := map[string]string{"zipf": zipfLimitJSON, "zipf-shares": zipfSharedLimitJSON}[t.kind]
		body = `{"key":"` + t.env.zipf.key(caller) + `","limit":` + limit + `}`
	case "flood":
		url += "/v1/allow"
		body = `{"key":"` + floodKey(caller) + `","limit":` + floodLimitJSON + `}`
	case "http-multi":
		url += "/v1/allow"
		body = `{"checks":[{"key":"` + key + `","limit":` + benchLimitJSON + `},{"key":"global","limit":` + benchLimitJSON + `}]}`
	case "http-batch":
		url += "/v1/allow/batch"
		var b strings.Builder
		b.WriteString(`{"requests":[`)
		for i := range t.env.opts.batch {
			if i > 0 {
				b.WriteByte(',')
			}
			b.WriteString(`{"key":"` + t.env.key(caller, seq*t.env.opts.batch+i) + `","limit":` + benchLimitJSON + `}`)
		}
		b.WriteString(`]}`)
		body = b.String()
		decisions = t.env.opts.batch
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader([]byte(body)))
	if err != nil {
		return 0, err
	}
	if t.token != "" {
		req.Header.Set("Authorization", "Bearer "+t.token)
	}
	resp, err := t.env.http.Do(req)
	if err != nil {
		return 0, err
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	denials := t.kind == "flood" || t.kind == "zipf" || t.kind == "zipf-shares"
	if resp.StatusCode != http.StatusOK && (!denials || resp.StatusCode != http.StatusTooManyRequests) {
		return 0, fmt.Errorf("status %d", resp.StatusCode)
	}
	t.tally.note(resp.StatusCode == http.StatusTooManyRequests, resp.Header.Get("X-Limitnode-Shared") == "true")
	return decisions, nil
}

type embeddedTarget struct {
	env    *environment
	label  string
	nodes  []*testcluster.Node
	shares *contract.LocalShares // embedded-shares: local shares on the limit
	// zipf: keys drawn as the zipf target draws them, under zipfLimit; a
	// denial counts as a decision.
	zipf  bool
	tally outcomeTally
}

func (t *embeddedTarget) name() string { return t.label }

func (t *embeddedTarget) servers() []serverProcess {
	return []serverProcess{selfProcess(inProcessName)}
}

func (t *embeddedTarget) where() string { return whereInProcess }

func (t *embeddedTarget) outcomes() *outcomeTally { return &t.tally }

func (t *embeddedTarget) do(ctx context.Context, caller, seq int) (int, error) {
	node := t.nodes[caller%len(t.nodes)].Node()
	check := contract.Check{Key: t.env.key(caller, seq), Limit: benchLimit, Cost: 1, LocalShares: t.shares}
	if t.zipf {
		check.Key, check.Limit = t.env.zipf.key(caller), zipfLimit
	}
	d, err := node.Allow(ctx, contract.Request{Checks: []contract.Check{check}})
	if err != nil {
		return 0, err
	}
	if !d.Allowed && !t.zipf {
		return 0, fmt.Errorf("denied")
	}
	t.tally.note(!d.Allowed, d.Shared)
	return 1, nil
}

// failoverResult is the time from killing the leader to the next decision.
type failoverResult struct {
	Runs   []time.Duration `json:"runs"`
	Median time.Duration   `json:"median"`
	Max    time.Duration   `json:"max"`
}

// measureFailover kills the leader of the limitnode cluster (as kill -9
// would: no hand-over) n times, each time timing how long until a surviving
// node decides again, then restarts the killed node.
func (e *environment) measureFailover(runs int) (failoverResult, error) {
	c := e.cluster("limitnode")
	var res failoverResult
	for i := range runs {
		c.WaitConverged()
		leader := c.WaitLeader()
		var survivor *testcluster.Node
		for _, n := range c.Nodes {
			if n != leader {
				survivor = n
				break
			}
		}
		leader.Kill()
		killed := time.Now()
		for {
			ctx, cancel := context.WithTimeout(context.Background(), time.Second)
			_, err := survivor.Node().Allow(ctx, contract.Request{Checks: []contract.Check{{Key: fmt.Sprintf("failover-%d", i), Limit: benchLimit, Cost: 1}}})
			cancel()
			if err == nil {
				break
			}
			if time.Since(killed) > time.Minute {
				return res, fmt.Errorf("no decision a minute after killing the leader: %w", err)
			}
		}
		res.Runs = append(res.Runs, time.Since(killed))
		leader.Restart()
	}
	sorted := slices.Clone(res.Runs)
	slices.Sort(sorted)
	res.Median, res.Max = sorted[len(sorted)/2], sorted[len(sorted)-1]
	return res, nil
}

// floodWorkers is how many callers send batches beside the measured single
// calls of http-flooded.
const floodWorkers = 4

// floodBatches sends batches as large as a call may be (1,000 requests of 4
// checks, the most a batch may hold) to url until stop closes.
func (e *environment) floodBatches(url string, worker int, stop <-chan struct{}) {
	var b strings.Builder
	b.WriteString(`{"requests":[`)
	for i := range 1000 {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(`{"checks":[`)
		for j := range 4 {
			if j > 0 {
				b.WriteByte(',')
			}
			fmt.Fprintf(&b, `{"key":"flood-%d-%d-%d","limit":%s}`, worker, i, j, benchLimitJSON)
		}
		b.WriteString(`]}`)
	}
	b.WriteString(`]}`)
	body := b.String()
	for {
		select {
		case <-stop:
			return
		default:
		}
		resp, err := e.http.Post(url+"/v1/allow/batch", "application/json", strings.NewReader(body))
		if err == nil {
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
		}
	}
}
