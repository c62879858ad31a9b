package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"strings"

	"github.com/limitnode/limitnode/cluster"
	"github.com/limitnode/limitnode/contract"
)

// recoverCommand rewrites the membership stored in a stopped node's data
// directory, for a cluster that lost its quorum for good (see
// cluster.Recover).
func recoverCommand(_ context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("limitnode recover", flag.ContinueOnError)
	fs.SetOutput(stderr)
	dataDir := fs.String("data", "./limitnode-data", "the stopped node's data directory")
	snapshotDir := fs.String("snapshot-dir", "", "its snapshot directory, if not in -data")
	members := fs.String("members", "", "the members to keep, as id=raft-address, comma-separated (every surviving node, the same list on each)")
	fs.Usage = func() {
		fmt.Fprintf(stderr, "Usage: limitnode recover -data DIR -members n1=10.0.0.1:7071,n2=10.0.0.2:7071\n\n"+
			"For a cluster that lost its quorum for good: stop every surviving node, run this on each with the\n"+
			"same -members, then start them without -join. Entries only the lost members held are gone.\n\n")
		fs.PrintDefaults()
	}
	if err := parseSubcommand(fs, args); err != nil {
		return err
	}
	var list []contract.Member
	for item := range strings.SplitSeq(*members, ",") {
		if item = strings.TrimSpace(item); item == "" {
			continue
		}
		id, addr, ok := strings.Cut(item, "=")
		if !ok {
			return &usageError{fmt.Sprintf("-members: %q is not id=raft-address", item)}
		}
		list = append(list, contract.Member{ID: id, RaftAddr: addr})
	}
	if len(list) == 0 {
		return &usageError{"-members names at least one member"}
	}
	logger := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	if err := cluster.Recover(*dataDir, *snapshotDir, list, logger); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "recovered %s: members %s; start the node without -join\n", *dataDir, *members)
	return nil
}
