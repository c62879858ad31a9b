package main

import (
	"context"
	"flag"
	"fmt"
	"time"

	"github.com/limitnode/limitnode/client"
)

// blocksVerbs are the verbs of limitnode blocks (put|list|delete): keys denied outright for
// a while.
var blocksVerbs = map[string]subcommand{"put": blocksPut, "list": blocksList, "delete": blocksDelete}

var blocksPut = remoteCommand("blocks put", "blocks put KEY -ttl D [-reason TEXT] [flags]", func(fs *flag.FlagSet) runRemote {
	ttl := fs.Duration("ttl", 0, "how long the key is blocked (1s to 8784h)")
	reason := fs.String("reason", "", "why, shown to the callers it denies")
	return func(ctx context.Context, r *remote, args []string) error {
		if err := wantArgs(args, 1, "KEY"); err != nil {
			return err
		}
		if *ttl == 0 {
			return &usageError{"blocks put needs -ttl"}
		}
		b, err := r.client.PutBlock(ctx, args[0], *ttl, *reason)
		if err != nil {
			return err
		}
		if r.json {
			return r.printJSON(b)
		}
		return r.blocks([]client.Block{b})
	}
})

var blocksList = remoteCommand("blocks list", "blocks list [-limit N] [flags]", func(fs *flag.FlagSet) runRemote {
	limit := fs.Int("limit", 0, "at most this many blocks (default: every one, a page of 100 at a time)")
	return func(ctx context.Context, r *remote, args []string) error {
		if err := wantArgs(args, 0, "no arguments"); err != nil {
			return err
		}
		var all []client.Block
		for after := ""; ; {
			page, err := r.client.Blocks(ctx, after, min(max(*limit-len(all), 0), 1000))
			if err != nil {
				return err
			}
			all = append(all, page.Blocks...)
			if page.Next == "" || (*limit > 0 && len(all) >= *limit) {
				break
			}
			after = page.Next
		}
		if r.json {
			return r.printJSON(all)
		}
		return r.blocks(all)
	}
})

var blocksDelete = remoteCommand("blocks delete", "blocks delete KEY [flags]", noFlags(func(ctx context.Context, r *remote, args []string) error {
	if err := wantArgs(args, 1, "KEY"); err != nil {
		return err
	}
	b, err := r.client.DeleteBlock(ctx, args[0])
	if err != nil {
		return err
	}
	if r.json {
		return r.printJSON(b)
	}
	fmt.Fprintf(r.stdout, "lifted the block of %s\n", b.Key)
	return nil
}))

// blocks prints blocks as a table.
func (r *remote) blocks(bs []client.Block) error {
	if len(bs) == 0 {
		fmt.Fprintln(r.stdout, "no blocked keys")
		return nil
	}
	var rows [][]string
	for _, b := range bs {
		by := "operator"
		if b.Penalty != "" {
			by = "penalty of " + b.Penalty
		}
		rows = append(rows, []string{b.Key, by, b.EndsIn.String(), time.Unix(0, b.UntilNanos).UTC().Format(time.RFC3339), b.Reason})
	}
	return r.table("KEY\tBY\tENDS IN\tUNTIL\tREASON", rows)
}
