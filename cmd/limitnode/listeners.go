package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
)

// listen binds a TCP address for one of the node's ports. The package's
// tests replace it, to lend a node started in the test's process a port
// the test holds (for instance across the node's restart).
var listen = net.Listen

// listeners are the node's ports, bound once its configuration is read and
// before anything else: a port of 0 in -http, -raft or -grpc is then a
// port the OS picked, and the node tells which on the next log line and in
// -addr-file.
type listeners struct {
	http, raft net.Listener
	grpc       net.Listener // nil without -grpc
}

// bind listens on -http, -raft and -grpc (when given), in that order. On an
// error it closes what it bound, and the error names the port.
func (c config) bind() (listeners, error) {
	var l listeners
	var err error
	if l.http, err = listen("tcp", c.httpAddr); err != nil {
		return l, fmt.Errorf("listen for HTTP: %w", err)
	}
	if l.raft, err = listen("tcp", c.raftAddr); err != nil {
		l.close()
		return l, fmt.Errorf("listen for raft on %s: %w", c.raftAddr, err)
	}
	if c.grpcAddr != "" {
		if l.grpc, err = listen("tcp", c.grpcAddr); err != nil {
			l.close()
			return l, fmt.Errorf("listen for gRPC: %w", err)
		}
	}
	return l, nil
}

// close closes every listener bound.
func (l listeners) close() {
	for _, ln := range []net.Listener{l.http, l.raft, l.grpc} {
		if ln != nil {
			ln.Close()
		}
	}
}

// addrs are the addresses bound, with the gRPC one empty without -grpc.
func (l listeners) addrs() boundAddrs {
	a := boundAddrs{HTTP: l.http.Addr().String(), Raft: l.raft.Addr().String()}
	if l.grpc != nil {
		a.GRPC = l.grpc.Addr().String()
	}
	return a
}

// log says what the node listens on: the first line it logs but for
// warnings about its configuration.
func (a boundAddrs) log(logger *slog.Logger) {
	logger.Info("listening", "http", a.HTTP, "raft", a.Raft, "grpc", a.GRPC)
}

// boundAddrs is what -addr-file holds: the addresses the node listens on,
// and those it tells the other members and clients.
type boundAddrs struct {
	HTTP           string `json:"http"`
	Raft           string `json:"raft"`
	GRPC           string `json:"grpc,omitempty"`
	AdvertisedHTTP string `json:"advertised_http"`
	AdvertisedRaft string `json:"advertised_raft"`
}

// writeAddrFile writes a to path at once whole: a reader sees no file or
// the complete one, never part of it (a temporary file in the same
// directory, renamed into place).
func writeAddrFile(path string, a boundAddrs) error {
	data, err := json.MarshalIndent(a, "", "  ")
	if err != nil {
		return err
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*")
	if err != nil {
		return fmt.Errorf("-addr-file: %w", err)
	}
	_, err = tmp.Write(append(data, '\n'))
	err = errors.Join(err, tmp.Close())
	if err == nil {
		err = os.Rename(tmp.Name(), path)
	}
	if err != nil {
		os.Remove(tmp.Name())
		return fmt.Errorf("-addr-file: %w", err)
	}
	return nil
}
