package main

import (
	"log/slog"
	"strconv"
)

// connCap is a flag that caps connections: its value, and whether the
// operator gave it (on the command line or as a variable). A cap left at
// its default is lowered to fit the process's descriptor limit; one the
// operator gave is kept, with a warning when it does not fit.
type connCap struct {
	n   int
	set bool
}

func (c *connCap) String() string { return strconv.Itoa(c.n) }

func (c *connCap) Set(s string) error {
	n, err := strconv.Atoi(s)
	if err != nil || n < 0 {
		return &usageError{"a connection cap is a whole number, 0 or more, not " + strconv.Quote(s)}
	}
	c.n, c.set = n, true
	return nil
}

// reservedDescriptors are the descriptors a node needs besides the
// connections its ports accept: standard streams, the poller, the listeners,
// the Raft log and stable store, snapshots being written and read, the
// data-directory probe, the connections it opens to the other members (a
// pool per member for Raft and one for forwarding) and those of a join or
// a status page. A hundred and twenty-eight leaves room for a cluster of
// several members with some to spare.
const reservedDescriptors = 128

// minFittedCap is the least a default cap is lowered to: below it a port
// would refuse ordinary traffic, and the descriptor limit is the thing to
// fix.
const minFittedCap = 16

// fitDescriptors makes the caps on connections fit in limit, the process's
// RLIMIT_NOFILE (0: unknown, nothing is done): with reservedDescriptors
// kept aside, the HTTP and gRPC ports (each capped by -max-http-conns) and
// the Raft port must fit. Caps at their default are lowered in proportion,
// -max-conns-per-client to a quarter of the lowered port cap at most, with
// a warning naming the limit; caps the operator gave are kept, with a
// warning that past the limit accepts fail.
func (c *config) fitDescriptors(limit uint64, logger *slog.Logger) {
	ports := 1
	if c.grpcAddr != "" {
		ports = 2
	}
	need := uint64(c.maxHTTPConns.n*ports + c.maxRaftConns.n + reservedDescriptors)
	if limit == 0 || need <= limit {
		return
	}
	budget := max(int(limit)-reservedDescriptors, 0)
	switch {
	case c.maxHTTPConns.set && c.maxRaftConns.set:
		logger.Warn("the connection caps can need more file descriptors than RLIMIT_NOFILE allows: past it, new connections fail with \"too many open files\"; raise the limit (ulimit -n, LimitNOFILE=) or lower the caps",
			"rlimit_nofile", limit, "descriptors_needed", need, "max_http_conns", c.maxHTTPConns.n, "max_raft_conns", c.maxRaftConns.n)
		return
	case c.maxRaftConns.set:
		c.maxHTTPConns.n = max((budget-c.maxRaftConns.n)/ports, minFittedCap)
	case c.maxHTTPConns.set:
		c.maxRaftConns.n = max(budget-c.maxHTTPConns.n*ports, minFittedCap)
	default:
		scale := float64(budget) / float64(c.maxHTTPConns.n*ports+c.maxRaftConns.n)
		c.maxHTTPConns.n = max(int(float64(c.maxHTTPConns.n)*scale), minFittedCap)
		c.maxRaftConns.n = max(int(float64(c.maxRaftConns.n)*scale), minFittedCap)
	}
	if !c.maxHTTPConns.set && !c.maxConnsPerClient.set && c.maxConnsPerClient.n > c.maxHTTPConns.n/4 {
		c.maxConnsPerClient.n = max(c.maxHTTPConns.n/4, 1)
	}
	logger.Warn("RLIMIT_NOFILE is too low for the default connection caps: lowered them to fit; raise the limit (ulimit -n, LimitNOFILE=) to keep the defaults",
		"rlimit_nofile", limit, "reserved", reservedDescriptors, "max_http_conns", c.maxHTTPConns.n, "max_raft_conns", c.maxRaftConns.n,
		"max_conns_per_client", c.maxConnsPerClient.n)
}
