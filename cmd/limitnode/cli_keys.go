package main

import (
	"context"
	"flag"
	"fmt"
	"strconv"

	"github.com/limitnode/limitnode/client"
)

// keysVerbs are the verbs of limitnode keys (list|get|reset): what the cluster holds of
// each key, and resetting one (to unblock a customer).
var keysVerbs = map[string]subcommand{"list": keysList, "get": keysGet, "reset": keysReset}

var keysList = remoteCommand("keys list", "keys list [-prefix P] [-limit N] [flags]", func(fs *flag.FlagSet) runRemote {
	prefix := fs.String("prefix", "", "only keys that start with this")
	limit := fs.Int("limit", 0, "at most this many keys (default: every one, a page of 100 at a time)")
	return func(ctx context.Context, r *remote, args []string) error {
		if err := wantArgs(args, 0, "no arguments"); err != nil {
			return err
		}
		var all []client.KeyState
		for after := ""; ; {
			page, err := r.client.Keys(ctx, *prefix, after, min(max(*limit-len(all), 0), 1000))
			if err != nil {
				return err
			}
			all = append(all, page.Keys...)
			if page.Next == "" || (*limit > 0 && len(all) >= *limit) {
				break
			}
			after = page.Next
		}
		if r.json {
			return r.printJSON(all)
		}
		return r.keys(all)
	}
})

var keysGet = remoteCommand("keys get", "keys get KEY [flags]", noFlags(func(ctx context.Context, r *remote, args []string) error {
	if err := wantArgs(args, 1, "KEY"); err != nil {
		return err
	}
	k, err := r.client.Key(ctx, args[0])
	if err != nil {
		return err
	}
	if r.json {
		return r.printJSON(k)
	}
	return r.keys([]client.KeyState{k})
}))

var keysReset = remoteCommand("keys reset", "keys reset KEY [flags]", noFlags(func(ctx context.Context, r *remote, args []string) error {
	if err := wantArgs(args, 1, "KEY"); err != nil {
		return err
	}
	n, err := r.client.ResetKey(ctx, args[0])
	if err != nil {
		return err
	}
	fmt.Fprintf(r.stdout, "reset %s (%d limits)\n", args[0], n)
	return nil
}))

// keys prints keys as a table: one row per key and limit.
func (r *remote) keys(ks []client.KeyState) error {
	if len(ks) == 0 {
		fmt.Fprintln(r.stdout, "no keys")
		return nil
	}
	var rows [][]string
	for _, k := range ks {
		for _, l := range k.Limits {
			rows = append(rows, []string{k.Key, ownerText(l.Owner), limitText(l.Limit), strconv.FormatInt(l.Remaining, 10), l.ResetAfter.String()})
		}
	}
	return r.table("KEY\tOWNER\tLIMIT\tREMAINING\tRESET", rows)
}

// deref is *p, or the zero value for nil.
// ownerText names whose limit a key's state is under.
func ownerText(owner string) string {
	if owner == "" {
		return "(inline)"
	}
	return owner
}
