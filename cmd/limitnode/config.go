package main

import (
	"flag"
	"fmt"
	"io"
	"net"
	"net/netip"
	"strings"
	"time"

	"github.com/limitnode/limitnode/cluster"
	"github.com/limitnode/limitnode/internal/clientip"
)

// config is the command's configuration, from flags and environment.
type config struct {
	id            string
	httpAddr      string
	grpcAddr      string
	advertiseHTTP string
	raftAddr      string
	advertiseRaft string
	addrFile      string
	dataDir       string
	snapshotDir   string
	join          string
	replace       bool
	expect        int
	logLevel      string
	raftLogLevel  string
	joinTimeout   time.Duration
	policiesFile  string
	rlsConfig     string
	maxKeys       int64
	keyLimitMode  string
	// maxWaitPerCaller and maxLeasesPerCaller bound what one caller holds
	// (cluster.Config's fields of the same names).
	maxWaitPerCaller   time.Duration
	maxLeasesPerCaller int64
	// maxRequestIDsPerCaller bounds the request IDs one caller has
	// remembered at once.
	maxRequestIDsPerCaller int64
	noSync                 bool
	pprof                  bool // serve /debug/pprof/ for the admin role
	denyLeaseCap           time.Duration
	maxRaftConns           connCap
	raftIdle               time.Duration
	maxHTTPConns           connCap
	maxConnsPerClient      connCap
	untrustedIdle          time.Duration
	trusted                string
	security
}

// security is the configuration of TLS and tokens; every field names a
// file but joinToken and joinTokenArg.
type security struct {
	tlsCert       string
	tlsKey        string
	tlsClientCA   string
	nodeCert      string
	nodeKey       string
	nodeCA        string
	authFile      string
	joinToken     string
	joinTokenFile string
	joinCA        string
	// joinTokenArg is set when -join-token came on the command line,
	// where every local user can read it (ps): parseConfig refuses it.
	joinTokenArg bool
}

// envName is the environment variable that sets a flag.
func envName(flagName string) string {
	return "LIMITNODE_" + strings.ToUpper(strings.ReplaceAll(flagName, "-", "_"))
}

// parseConfig reads flags from args, taking a flag's default from
// LIMITNODE_<NAME> when that variable is set. A mistake is a *usageError.
func parseConfig(args []string, getenv func(string) string, output io.Writer) (config, error) {
	var c config
	fs := c.flagSet(output)
	fs.Usage = func() { printUsage(fs, output) }
	var envErr error
	fs.VisitAll(func(f *flag.Flag) {
		name := envName(f.Name)
		if v := getenv(name); v != "" && envErr == nil {
			if err := f.Value.Set(v); err != nil {
				envErr = &usageError{fmt.Sprintf("%s=%q is not a valid value for -%s (%s)", name, v, f.Name, f.Usage)}
			}
		}
	})
	if envErr != nil {
		return c, envErr
	}
	if err := parseFlags(fs, args); err != nil {
		return c, err
	}
	fs.Visit(func(f *flag.Flag) { c.joinTokenArg = c.joinTokenArg || f.Name == "join-token" })
	if c.joinTokenArg {
		return c, &usageError{"-join-token is refused on the command line, where every local user can read it (ps, /proc) for as long as the node runs: give the token with -join-token-file, or in LIMITNODE_JOIN_TOKEN"}
	}
	if fs.NArg() > 0 {
		return c, &usageError{fmt.Sprintf("unexpected arguments: %q", fs.Args())}
	}
	if c.keyLimitMode != "deny" && c.keyLimitMode != "allow" {
		return c, &usageError{fmt.Sprintf("-key-limit-mode must be deny or allow, not %q", c.keyLimitMode)}
	}
	if host, _, err := net.SplitHostPort(c.raftAddr); err == nil && c.advertiseRaft == "" && unspecifiedHost(host) {
		return c, &usageError{fmt.Sprintf("-raft %s listens on every interface: give -advertise-raft, the address the other members reach it at", c.raftAddr)}
	}
	if host, _, err := net.SplitHostPort(c.advertiseRaft); c.advertiseRaft != "" && (err != nil || unspecifiedHost(host)) {
		return c, &usageError{fmt.Sprintf("-advertise-raft %q is not an address the other members can dial: give host:port, the host a name or an IP that is not 0.0.0.0 or ::", c.advertiseRaft)}
	}
	if _, err := c.trustedProxies(); err != nil {
		return c, &usageError{fmt.Sprintf("-trusted-proxies: %v", err)}
	}
	if c.expect < 0 {
		return c, &usageError{fmt.Sprintf("-bootstrap-expect must be at least 1, not %d", c.expect)}
	}
	if c.expect > 0 && strings.TrimSpace(c.join) == "" {
		return c, &usageError{"-bootstrap-expect needs -join naming every node of the new cluster"}
	}
	if n := len(strings.FieldsFunc(c.join, func(r rune) bool { return r == ',' })); c.expect > 0 && n > c.expect {
		return c, &usageError{fmt.Sprintf("-join names %d addresses but -bootstrap-expect is %d: name the nodes of the new cluster, and only those", n, c.expect)}
	}
	if err := c.security.check(); err != nil {
		return c, err
	}
	return c, nil
}

// flagSet defines the node's flags on a new FlagSet that sets c, without
// parsing anything: parseConfig parses it, and the test that writes
// docs/configuration.md lists it.
func (c *config) flagSet(output io.Writer) *flag.FlagSet {
	c.maxRaftConns, c.maxHTTPConns, c.maxConnsPerClient = connCap{n: 1024}, connCap{n: 10000}, connCap{n: 256}
	fs := flag.NewFlagSet("limitnode", flag.ContinueOnError)
	fs.SetOutput(output)
	fs.StringVar(&c.id, "id", "node1", "node ID, unique in the cluster")
	fs.StringVar(&c.httpAddr, "http", "127.0.0.1:7070", "HTTP listen address")
	fs.StringVar(&c.grpcAddr, "grpc", "", "gRPC listen address of Envoy's rate limit service, health and reflection (off when empty)")
	fs.StringVar(&c.advertiseHTTP, "advertise-http", "", "the HTTP address other members and clients reach this node at (default: -http, with the host of -advertise-raft, else -raft, in place of 0.0.0.0 or ::)")
	fs.StringVar(&c.raftAddr, "raft", "127.0.0.1:7071", "Raft listen address (also the advertised one unless -advertise-raft is given)")
	fs.StringVar(&c.advertiseRaft, "advertise-raft", "", "the Raft address other members reach this node at, e.g. a stable DNS name (needed when -raft listens on 0.0.0.0); port 0 stands for the port -raft listens on")
	fs.StringVar(&c.addrFile, "addr-file", "", "write the addresses the node listens on and advertises, as JSON, to this file once every port is bound (for scripts and tests: with port 0 in -http, -raft or -grpc, the OS picks the port); removed when the node stops")
	fs.StringVar(&c.dataDir, "data", "./limitnode-data", "data directory (Raft log, stable store, snapshots)")
	fs.StringVar(&c.snapshotDir, "snapshot-dir", "", "keep snapshots here instead of in -data (another disk keeps their writes from delaying the log's)")
	fs.StringVar(&c.join, "join", "", "comma-separated HTTP addresses of existing members; omit to start (or restart) on your own")
	fs.BoolVar(&c.replace, "replace", false, "with -join: replace a member that has this -id and still runs at another address (refused without it)")
	fs.IntVar(&c.expect, "bootstrap-expect", 0, "form a new cluster once this many nodes, -join naming all of them, answer (every node started with the same value); a node with state ignores it")
	fs.StringVar(&c.logLevel, "log-level", "info", "least level logged: debug, info, warn or error")
	fs.StringVar(&c.raftLogLevel, "raft-log-level", "warn", "least level of Raft's own logs: debug, info, warn or error")
	fs.DurationVar(&c.joinTimeout, "join-timeout", time.Minute, "how long to keep trying the -join addresses")
	fs.BoolVar(&c.pprof, "pprof", false, "serve Go's profiles (net/http/pprof) at /debug/pprof/ on the HTTP port, to the admin role")
	fs.BoolVar(&c.noSync, "no-sync", false, "do not fsync the Raft log on each append: faster, but a simultaneous power loss of a majority can lose the last decisions")
	fs.DurationVar(&c.denyLeaseCap, "deny-lease-cap", cluster.DefaultDenyLeaseCap, "the longest a node repeats a denial of the leader's without asking it (a deny lease), and so how long a policy change, key reset or restore waits before it is acknowledged; negative: no deny leases")
	fs.Int64Var(&c.maxKeys, "max-keys", cluster.DefaultMaxKeys, "most live (key, limit) pairs the cluster keeps; -1 for no cap")
	fs.StringVar(&c.keyLimitMode, "key-limit-mode", "deny", "when -max-keys is reached, new keys are refused (deny: 503) or admitted unrecorded (allow)")
	fs.DurationVar(&c.maxWaitPerCaller, "max-wait-per-caller", cluster.DefaultMaxWaitPerCaller, "longest max_wait a request may ask for: how long one caller's reservations can hold a shared key in debt, shutting others out (at most 1h)")
	fs.Int64Var(&c.maxLeasesPerCaller, "max-leases-per-caller", cluster.DefaultMaxLeasesPerCaller, "most leases and waiting lease requests one API token holds at once; -1 for no bound but the cluster's 1,000,000")
	fs.Int64Var(&c.maxRequestIDsPerCaller, "max-request-ids-per-caller", cluster.DefaultMaxRequestIDsPerCaller, "most request IDs one API token has remembered at once, each for 5m; past it, its requests with new IDs are refused (503), never another's forgotten; -1 for no bound but the cluster's 1,048,576 (the only bound without tokens)")
	fs.Var(&c.maxRaftConns, "max-raft-conns", "most connections open at once on the Raft port; one more is closed at once (the default is lowered to fit RLIMIT_NOFILE)")
	fs.DurationVar(&c.raftIdle, "raft-idle-timeout", 2*time.Minute, "close a connection on the Raft port that sends nothing for this long")
	fs.Var(&c.maxHTTPConns, "max-http-conns", "most connections open at once on the HTTP port, and on the gRPC port; one more closes the connection idle longest of the client address holding the most, or is closed at once when every one has a request under way (the default is lowered to fit RLIMIT_NOFILE)")
	fs.Var(&c.maxConnsPerClient, "max-conns-per-client", "most connections open at once from one client address (an IPv6 address with its /64) on the HTTP port, and on the gRPC port, and requests under way from one over HTTP/2 on the HTTP port (one more: 503); a proxy in front of the node connects from one address: size this for its concurrent requests; 0 for no cap")
	fs.DurationVar(&c.untrustedIdle, "untrusted-idle-timeout", 10*time.Second, "close a connection on the HTTP or gRPC port that is silent this long before it has made a call (with -auth: a call with a valid token); after one, the ports' own idle timeouts apply")
	fs.StringVar(&c.trusted, "trusted-proxies", "127.0.0.0/8,::1", "comma-separated CIDRs of the proxies whose X-Forwarded-For /v1/forward-auth believes for client_ip; none for no proxy")
	fs.StringVar(&c.policiesFile, "policies", "", "JSON file of named policies to store when this node bootstraps a new cluster")
	fs.StringVar(&c.rlsConfig, "rls-config", "", "envoyproxy/ratelimit YAML file, or a directory of them (a mounted ConfigMap), one domain each: stored when this node bootstraps a new cluster, then read every 0.5s by every node, the leader putting a changed valid file through the log")
	fs.StringVar(&c.tlsCert, "tls-cert", "", "PEM certificate of the HTTP and gRPC APIs: serve HTTPS (with -tls-key; re-read when it changes)")
	fs.StringVar(&c.tlsKey, "tls-key", "", "PEM private key of -tls-cert")
	fs.StringVar(&c.tlsClientCA, "tls-client-ca", "", "PEM CA: also require HTTPS clients to present a certificate it signed")
	fs.StringVar(&c.nodeCert, "node-cert", "", "PEM certificate of this node for mutual TLS on the Raft port (with -node-key and -node-ca)")
	fs.StringVar(&c.nodeKey, "node-key", "", "PEM private key of -node-cert")
	fs.StringVar(&c.nodeCA, "node-ca", "", "PEM CA that signs every member's -node-cert")
	fs.StringVar(&c.authFile, "auth", "", "JSON token file: every API call but /healthz and /readyz needs a bearer token with its role (re-read when it changes)")
	fs.StringVar(&c.joinToken, "join-token", "", "token (role admin) sent with -join to a cluster that has -auth, given only in LIMITNODE_JOIN_TOKEN (on the command line, where every local user can read it, it is refused) or with -join-token-file")
	fs.StringVar(&c.joinTokenFile, "join-token-file", "", "file whose first line is the -join-token (the file limitnode token writes, as it is)")
	fs.StringVar(&c.joinCA, "join-ca", "", "PEM CA to trust for the members' HTTPS API when joining (default -node-ca)")
	return fs
}

// printUsage writes limitnode -h: how to run a node or a command, the
// commands, and fs's flags (the node's).
func printUsage(fs *flag.FlagSet, output io.Writer) {
	fmt.Fprintf(output, "Usage: limitnode [flags]            run a node (the flags are below)\n       limitnode COMMAND [flags]    run a command (limitnode COMMAND -h for its flags):\n\n")
	printCommands(output)
	fmt.Fprintln(output)
	fmt.Fprintf(output, "Every flag can also be set as LIMITNODE_<NAME> (dashes as underscores, e.g. LIMITNODE_LOG_LEVEL);\na flag on the command line wins over its variable.\n\nFlags:\n")
	fs.PrintDefaults()
}

// check refuses an incomplete set of TLS flags, and two join tokens.
func (s *security) check() error {
	if s.joinToken != "" && s.joinTokenFile != "" {
		return &usageError{"-join-token and -join-token-file both give the join token: give one"}
	}
	if (s.tlsCert == "") != (s.tlsKey == "") {
		return &usageError{"-tls-cert and -tls-key go together"}
	}
	if s.tlsClientCA != "" && s.tlsCert == "" {
		return &usageError{"-tls-client-ca needs -tls-cert and -tls-key (client certificates are checked over HTTPS)"}
	}
	node := map[string]string{"-node-cert": s.nodeCert, "-node-key": s.nodeKey, "-node-ca": s.nodeCA}
	var missing, given []string
	for _, name := range []string{"-node-cert", "-node-key", "-node-ca"} {
		if node[name] == "" {
			missing = append(missing, name)
		} else {
			given = append(given, name)
		}
	}
	if len(given) > 0 && len(missing) > 0 {
		return &usageError{fmt.Sprintf("%s given without %s: mutual TLS on the Raft port needs all three", strings.Join(given, ", "), strings.Join(missing, ", "))}
	}
	return nil
}

// trustedProxies is -trusted-proxies parsed: "none" is no proxy.
func (c config) trustedProxies() ([]netip.Prefix, error) {
	if strings.TrimSpace(c.trusted) == "none" {
		return []netip.Prefix{}, nil
	}
	return clientip.ParsePrefixes(strings.Split(c.trusted, ",")...)
}

// checkPorts refuses two listeners of the node on one address: -http, -raft
// and -grpc each need a port of their own (port 0, any free port, never
// clashes).
func (c config) checkPorts() error {
	named := []struct{ flag, addr string }{{"-http", c.httpAddr}, {"-raft", c.raftAddr}, {"-grpc", c.grpcAddr}}
	for i, a := range named {
		for _, b := range named[i+1:] {
			if a.addr != "" && b.addr != "" && sameListenAddr(a.addr, b.addr) {
				return &usageError{fmt.Sprintf("%s %s and %s %s name the same port: give each its own", a.flag, a.addr, b.flag, b.addr)}
			}
		}
	}
	return nil
}

// sameListenAddr reports whether listening on a and on b would clash: the
// same port, other than 0, on the same host or with either on every
// interface.
func sameListenAddr(a, b string) bool {
	ha, pa, errA := net.SplitHostPort(a)
	hb, pb, errB := net.SplitHostPort(b)
	if errA != nil || errB != nil || pa != pb || pa == "0" {
		return false
	}
	return ha == hb || unspecifiedHost(ha) || unspecifiedHost(hb)
}

// unspecifiedHost reports whether host, of an address to listen on, means
// every interface: empty, 0.0.0.0 or ::.
func unspecifiedHost(host string) bool {
	ip := net.ParseIP(host)
	return host == "" || (ip != nil && ip.IsUnspecified())
}
