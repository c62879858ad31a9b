package main

import (
	"cmp"
	"context"
	"flag"
	"fmt"
	"io"
	"maps"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/limitnode/limitnode/client"
	"github.com/limitnode/limitnode/httpapi"
)

var allowCommand = remoteCommand("allow", "allow -key K -rate N [-period 1m] [-algorithm A] [-burst N] [-cost N] | -key K -policy P [flags]", func(fs *flag.FlagSet) runRemote {
	key := fs.String("key", "", "the key to check")
	rate := fs.Int64("rate", 0, "requests allowed per period")
	period := fs.Duration("period", 0, "the limit's period, a Go duration (default 1s)")
	algorithm := fs.String("algorithm", "", "token_bucket (default), leaky_bucket, gcra, fixed_window, sliding_window_log, sliding_window_counter")
	burst := fs.Int64("burst", 0, "bucket capacity (default: rate)")
	cost := fs.Int64("cost", 1, "what the request consumes; 0 checks without consuming")
	policy := fs.String("policy", "", "a stored policy instead of -rate")
	requestID := fs.String("request-id", "", "makes a retry safe: the same request with the same ID is decided once")
	settle := fs.Duration("settle", 0, "reserve the cost, to settle within this long with what was used (limitnode settle ID COST)")
	return func(ctx context.Context, r *remote, args []string) error {
		if err := wantArgs(args, 0, "no arguments"); err != nil {
			return err
		}
		rateGiven := false
		fs.Visit(func(f *flag.Flag) { rateGiven = rateGiven || f.Name == "rate" })
		switch {
		case *key == "":
			return &usageError{"allow needs -key"}
		case *policy == "" && !rateGiven:
			return &usageError{"allow needs -rate (an inline limit) or -policy (a stored one)"}
		case *policy != "" && rateGiven:
			return &usageError{"allow takes -rate or -policy, not both"}
		}
		req := client.AllowRequest{Key: *key, Policy: *policy, Cost: *cost, Peek: *cost == 0, RequestID: *requestID, SettleTTL: *settle}
		if *policy == "" {
			req.Limit = &client.Limit{Algorithm: *algorithm, Rate: *rate, Period: *period, Burst: *burst}
		}
		d, err := r.client.Allow(ctx, req)
		if err != nil {
			return err
		}
		if r.json {
			if err := r.printJSON(d); err != nil {
				return err
			}
		} else {
			verdict := "allowed"
			if !d.Allowed {
				verdict = "denied"
			}
			if err := r.table("DECISION\tLIMIT\tREMAINING\tRESET\tRETRY AFTER", [][]string{{
				verdict, strconv.FormatInt(d.Limit, 10), strconv.FormatInt(d.Remaining, 10),
				d.ResetAfter.String(), d.ExactRetryAfter.String(),
			}}); err != nil {
				return err
			}
			if by := d.DeniedBy; by != nil {
				fmt.Fprintf(r.stdout, "denied by %s\n", deniedByText(by))
			}
			if d.SettlementID != "" {
				fmt.Fprintf(r.stdout, "reserved: settle with limitnode settle %s COST\n", d.SettlementID)
			}
			if b := d.Blocked; b != nil {
				fmt.Fprintf(r.stdout, "blocked for %s more: %s\n", b.EndsIn.String(), cmp.Or(b.Reason, "(no reason given)"))
			}
		}
		if !d.Allowed {
			return errDenied
		}
		return nil
	}
})

// policyVerbs are the verbs of limitnode policy.
var policyVerbs = map[string]subcommand{"put": policyPut, "get": policyGet, "list": policyList, "delete": policyDelete}

// verbCommand makes a command that dispatches to one of verbs by its first
// argument: "limitnode policy put ...".
func verbCommand(name string, verbs map[string]subcommand) subcommand {
	names := slices.Sorted(maps.Keys(verbs))
	return func(ctx context.Context, args []string, stdout, stderr io.Writer) error {
		if len(args) == 0 || verbs[args[0]] == nil {
			fmt.Fprintf(stderr, "Usage: limitnode %s %s ... (limitnode %s %s -h for each)\n", name, strings.Join(names, "|"), name, names[0])
			return &usageError{}
		}
		return verbs[args[0]](ctx, args[1:], stdout, stderr)
	}
}

// openInput opens a command's FILE argument: "-" is standard input (which
// closing leaves open).
func openInput(name string) (io.ReadCloser, error) {
	if name == "-" {
		return io.NopCloser(os.Stdin), nil
	}
	return os.Open(name)
}

var policyPut = remoteCommand("policy put", "policy put NAME FILE ('-': standard input; the JSON body of PUT /v1/policies/NAME) [flags]", noFlags(func(ctx context.Context, r *remote, args []string) error {
	if err := wantArgs(args, 2, "NAME FILE"); err != nil {
		return err
	}
	var p client.Policy
	if err := readJSONFile(args[1], "a policy", httpapi.MaxBatchBodyBytes, &p); err != nil {
		return err
	}
	out, err := r.client.PutPolicy(ctx, args[0], p)
	if err != nil {
		return err
	}
	if r.json {
		return r.printJSON(out)
	}
	return r.policies([]client.Policy{out})
}))

var policyGet = remoteCommand("policy get", "policy get NAME [flags]", noFlags(func(ctx context.Context, r *remote, args []string) error {
	if err := wantArgs(args, 1, "NAME"); err != nil {
		return err
	}
	p, err := r.client.GetPolicy(ctx, args[0])
	if err != nil {
		return err
	}
	if r.json {
		return r.printJSON(p)
	}
	return r.policies([]client.Policy{p})
}))

var policyList = remoteCommand("policy list", "policy list [flags]", noFlags(func(ctx context.Context, r *remote, args []string) error {
	if err := wantArgs(args, 0, "no arguments"); err != nil {
		return err
	}
	var all []client.Policy
	for after := ""; ; {
		page, err := r.client.ListPolicies(ctx, after, 0)
		if err != nil {
			return err
		}
		all = append(all, page.Policies...)
		if page.Next == "" {
			break
		}
		after = page.Next
	}
	if r.json {
		return r.printJSON(all)
	}
	return r.policies(all)
}))

var policyDelete = remoteCommand("policy delete", "policy delete NAME [flags]", noFlags(func(ctx context.Context, r *remote, args []string) error {
	if err := wantArgs(args, 1, "NAME"); err != nil {
		return err
	}
	if err := r.client.DeletePolicy(ctx, args[0]); err != nil {
		return err
	}
	fmt.Fprintf(r.stdout, "deleted %s\n", args[0])
	return nil
}))

// policies prints policies as a table.
func (r *remote) policies(ps []client.Policy) error {
	var rows [][]string
	for _, p := range ps {
		limit := "?"
		if p.Limit != nil {
			limit = limitText(*p.Limit)
		}
		shadowDenied := "-"
		if p.ShadowDenied != nil {
			shadowDenied = strconv.FormatInt(*p.ShadowDenied, 10)
		}
		rows = append(rows, []string{p.Name, limit, strconv.Itoa(len(p.Overrides)), cmp.Or(p.KeyTemplate, "-"), strconv.FormatBool(p.Shadow), shadowDenied})
	}
	return r.table("NAME\tLIMIT\tOVERRIDES\tKEY TEMPLATE\tSHADOW\tSHADOW DENIED", rows)
}

var backupCommand = backupTransferCommand("backup", "backup -o FILE [flags]", func(fs *flag.FlagSet) runRemote {
	out := fs.String("o", "", "the file to write the backup to")
	return func(ctx context.Context, r *remote, args []string) error {
		if err := wantArgs(args, 0, "no arguments (give -o FILE)"); err != nil {
			return err
		}
		if *out == "" {
			return &usageError{"backup needs -o FILE"}
		}
		tmp := *out + ".partial"
		f, err := os.Create(tmp)
		if err != nil {
			return err
		}
		info, err := r.client.Backup(ctx, f)
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			os.Remove(tmp)
			return err
		}
		if err := os.Rename(tmp, *out); err != nil {
			return err
		}
		if r.json {
			return r.printJSON(info)
		}
		return r.table("FILE\tINDEX\tSERVED BY\tLIMITS DIGEST", [][]string{{*out, strconv.FormatUint(info.Index, 10), info.ServedBy, short(info.LimitsDigest)}})
	}
})

var restoreCommand = backupTransferCommand("restore", "restore FILE [flags]", noFlags(func(ctx context.Context, r *remote, args []string) error {
	if err := wantArgs(args, 1, "FILE"); err != nil {
		return err
	}
	f, err := os.Open(args[0])
	if err != nil {
		return err
	}
	defer f.Close()
	stat, err := f.Stat()
	if err != nil {
		return err
	}
	res, err := r.client.Restore(ctx, f, stat.Size())
	if err != nil {
		return err
	}
	if r.json {
		return r.printJSON(res)
	}
	return r.table("BACKUP INDEX\tRESTORED AT\tLIMITS DIGEST", [][]string{{strconv.FormatUint(res.BackupIndex, 10), strconv.FormatUint(res.RestoredIndex, 10), short(res.LimitsDigest)}})
}))

func short(digest string) string {
	if len(digest) > 16 {
		return digest[:16] + "…"
	}
	return strings.TrimSpace(digest)
}

// shortDuration writes a whole number of hours or minutes without Go's
// zero units ("1m0s" is 1m); anything else as Go does.
// limitText is a limit as a table shows it: "token_bucket 100/1m burst 10".
// deniedByText says what denied a request: "check 0, policy api (version
// 12): token_bucket 100/1m (limit)".
func deniedByText(by *client.DeniedBy) string {
	l := by.Limit
	policy := "an inline limit"
	if by.Policy != "" {
		policy = fmt.Sprintf("policy %s (version %d)", by.Policy, by.PolicyVersion)
	}
	return fmt.Sprintf("check %d, %s: %s (%s)", by.Check, policy, limitText(l), by.Cause)
}

func limitText(l client.Limit) string {
	text := fmt.Sprintf("%s %d/%s", cmp.Or(l.Algorithm, "token_bucket"), l.Rate, shortDuration(cmp.Or(l.Period, time.Second).String()))
	if l.Burst != 0 && l.Burst != l.Rate {
		text += fmt.Sprintf(" burst %d", l.Burst)
	}
	return text
}

func shortDuration(s string) string {
	d, err := time.ParseDuration(s)
	switch {
	case err != nil || d == 0:
		return s
	case d%time.Hour == 0:
		return strconv.FormatInt(int64(d/time.Hour), 10) + "h"
	case d%time.Minute == 0:
		return strconv.FormatInt(int64(d/time.Minute), 10) + "m"
	}
	return d.String()
}
