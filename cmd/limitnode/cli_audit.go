package main

import (
	"cmp"
	"context"
	"flag"
	"fmt"
	"strconv"
	"time"

	"github.com/limitnode/limitnode/client"
)

// auditCommand lists the audit trail: every change operators made, who and
// when.
var auditCommand = remoteCommand("audit", "audit [-since INDEX] [-limit N] [flags]", func(fs *flag.FlagSet) runRemote {
	since := fs.Uint64("since", 0, "only changes recorded after this log index")
	limit := fs.Int("limit", 0, "at most this many changes (default: every one kept, a page of 100 at a time)")
	return func(ctx context.Context, r *remote, args []string) error {
		if err := wantArgs(args, 0, "no arguments"); err != nil {
			return err
		}
		var all []client.AuditEntry
		var dropped int64
		for after := *since; ; {
			page, err := r.client.Audit(ctx, after, min(max(*limit-len(all), 0), 1000))
			if err != nil {
				return err
			}
			all, dropped = append(all, page.Entries...), page.Dropped
			if page.Next == 0 || (*limit > 0 && len(all) >= *limit) {
				break
			}
			after = page.Next
		}
		if r.json {
			return r.printJSON(all)
		}
		if len(all) == 0 {
			fmt.Fprintln(r.stdout, "no changes recorded")
		} else {
			var rows [][]string
			for _, e := range all {
				rows = append(rows, []string{strconv.FormatUint(e.Index, 10), time.Unix(0, e.AtNanos).UTC().Format(time.RFC3339),
					cmp.Or(e.Actor, "(no token)"), e.Action, cmp.Or(e.Subject, "-"), e.Detail})
			}
			if err := r.table("INDEX\tTIME\tBY\tACTION\tSUBJECT\tDETAIL", rows); err != nil {
				return err
			}
		}
		if dropped > 0 {
			fmt.Fprintf(r.stdout, "(%d older changes are no longer kept)\n", dropped)
		}
		return nil
	}
})
