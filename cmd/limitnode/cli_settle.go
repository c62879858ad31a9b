package main

import (
	"context"
	"fmt"
	"strconv"
)

// settleCommand settles an open settlement (allow -settle) with what the request
// used.
var settleCommand = remoteCommand("settle", "settle SETTLEMENT_ID COST [flags]", noFlags(func(ctx context.Context, r *remote, args []string) error {
	if err := wantArgs(args, 2, "SETTLEMENT_ID COST"); err != nil {
		return err
	}
	cost, err := strconv.ParseInt(args[1], 10, 64)
	if err != nil {
		return &usageError{fmt.Sprintf("COST must be an integer, not %q", args[1])}
	}
	s, err := r.client.Settle(ctx, args[0], cost)
	if err != nil {
		return err
	}
	if r.json {
		return r.printJSON(s)
	}
	rows := [][]string{{s.SettlementID, strconv.FormatInt(s.Upfront, 10), strconv.FormatInt(s.Cost, 10),
		strconv.FormatInt(s.Refunded, 10), strconv.FormatInt(s.Charged, 10), s.RetryAfter.String()}}
	if err := r.table("SETTLEMENT\tRESERVED\tCOST\tREFUNDED\tCHARGED\tIN DEBT FOR", rows); err != nil {
		return err
	}
	if s.Duplicate {
		fmt.Fprintln(r.stdout, "(settled before with this cost: nothing changed)")
	}
	return nil
}))
