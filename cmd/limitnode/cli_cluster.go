package main

import (
	"cmp"
	"context"
	"errors"
	"flag"
	"fmt"
	"slices"
	"strconv"
	"time"

	"github.com/limitnode/limitnode/client"
)

var statusCommand = remoteCommand("status", "status [flags]", noFlags(func(ctx context.Context, r *remote, args []string) error {
	if err := wantArgs(args, 0, "no arguments"); err != nil {
		return err
	}
	st, err := r.client.Cluster(ctx)
	if err != nil {
		return err
	}
	if r.json {
		return r.printJSON(st)
	}
	leader := st.Leader
	if leader == "" {
		leader = "(none known)"
	}
	ready, err := r.client.Ready(ctx)
	if err != nil {
		return err
	}
	readiness := "ready"
	if !ready.Ready {
		readiness = "not ready: " + ready.Reason
	}
	return r.table("NODE\tLEADER\tTERM\tCOMMIT\tAPPLIED\tMEMBERS\tREADY", [][]string{{
		st.Self, leader, strconv.FormatUint(st.Term, 10), strconv.FormatUint(st.CommitIndex, 10),
		strconv.FormatUint(st.AppliedIndex, 10), strconv.Itoa(len(st.Nodes)), readiness,
	}})
}))

var membersCommand = remoteCommand("members", "members [flags]", noFlags(func(ctx context.Context, r *remote, args []string) error {
	if err := wantArgs(args, 0, "no arguments"); err != nil {
		return err
	}
	st, err := r.client.Cluster(ctx)
	if err != nil {
		return err
	}
	if r.json {
		return r.printJSON(st.Nodes)
	}
	if len(st.Nodes) == 0 {
		fmt.Fprintf(r.stdout, "no members: %s belongs to no cluster yet (join it, or start it without -join to bootstrap one)\n", cmp.Or(st.Self, "the node"))
		return nil
	}
	slices.SortFunc(st.Nodes, func(a, b client.ClusterNode) int { return cmp.Compare(a.ID, b.ID) })
	var rows [][]string
	for _, n := range st.Nodes {
		role := "follower"
		switch {
		case n.Leader:
			role = "leader"
		case !n.Voter:
			role = "non-voter"
		}
		reachable, contact, lag := "?", "?", "?"
		if n.Reachable != nil {
			reachable = strconv.FormatBool(*n.Reachable)
		}
		if n.LastContact != nil {
			contact = n.LastContact.String()
		}
		if n.Lag != nil {
			lag = strconv.FormatUint(*n.Lag, 10)
		}
		rows = append(rows, []string{n.ID, role, n.RaftAddr, n.HTTPAddr, reachable, contact, lag})
	}
	return r.table("ID\tROLE\tRAFT\tHTTP\tREACHABLE\tLAST CONTACT\tLAG", rows)
}))

var joinCommand = remoteCommand("join", "join -id ID -raft RAFT_ADDR [-http HTTP_ADDR] [flags]", func(fs *flag.FlagSet) runRemote {
	id := fs.String("id", "", "the new member's ID")
	raftAddr := fs.String("raft", "", "its Raft address (it must be running: the leader asks it who it is)")
	httpAddr := fs.String("http", "", "its HTTP address")
	replace := fs.Bool("replace", false, "evict a running member with the same ID (refused without it)")
	force := fs.Bool("force", false, "join even if fewer voters than a quorum would answer (refused without it)")
	return func(ctx context.Context, r *remote, args []string) error {
		if err := wantArgs(args, 0, "no arguments (give -id and -raft)"); err != nil {
			return err
		}
		if *id == "" || *raftAddr == "" {
			return &usageError{"join needs -id and -raft"}
		}
		change := client.MemberChange{Replace: *replace, Force: *force}
		member := client.Member{ID: *id, RaftAddr: *raftAddr, HTTPAddr: *httpAddr}
		// A join repeated is harmless (the cluster answers a member it
		// has as joined), so one whose outcome the cluster could not tell
		// (a leader change, a loaded machine) is asked again while the
		// command has time.
		err := r.client.JoinWith(ctx, member, change)
		for errors.Is(err, client.ErrOutcomeUnknown) && ctx.Err() == nil {
			select {
			case <-ctx.Done():
			case <-time.After(200 * time.Millisecond):
				err = r.client.JoinWith(ctx, member, change)
			}
		}
		if err != nil {
			return err
		}
		fmt.Fprintf(r.stdout, "joined %s (%s)\n", *id, *raftAddr)
		return nil
	}
})

var removeCommand = remoteCommand("remove", "remove [-force] ID [flags]", func(fs *flag.FlagSet) runRemote {
	force := fs.Bool("force", false, "remove even if fewer voters than a quorum of the rest would answer (refused without it)")
	return func(ctx context.Context, r *remote, args []string) error {
		if err := wantArgs(args, 1, "the member's ID"); err != nil {
			return err
		}
		if err := r.client.RemoveMemberWith(ctx, args[0], client.MemberChange{Force: *force}); err != nil {
			return err
		}
		fmt.Fprintf(r.stdout, "removed %s\n", args[0])
		return nil
	}
})

var transferCommand = remoteCommand("transfer-leadership", "transfer-leadership [-to ID] [flags]", func(fs *flag.FlagSet) runRemote {
	to := fs.String("to", "", "the member to lead next (default: any other voter)")
	return func(ctx context.Context, r *remote, args []string) error {
		if err := wantArgs(args, 0, "no arguments"); err != nil {
			return err
		}
		st, err := r.client.TransferLeadership(ctx, *to)
		if err != nil {
			return err
		}
		if r.json {
			return r.printJSON(st)
		}
		fmt.Fprintf(r.stdout, "leader is now %s (term %d)\n", cmp.Or(st.Leader, "(being elected)"), st.Term)
		return nil
	}
})

var healthCommand = remoteCommand("health", "health [flags]", noFlags(func(ctx context.Context, r *remote, args []string) error {
	if err := wantArgs(args, 0, "no arguments"); err != nil {
		return err
	}
	ready, err := r.client.Ready(ctx)
	if err != nil {
		return err
	}
	if r.json {
		return r.printJSON(ready)
	}
	if !ready.Ready {
		return fmt.Errorf("not ready: %s", ready.Reason)
	}
	fmt.Fprintln(r.stdout, "ready")
	return nil
}))
