// Command limitnode runs one node of a limitnode cluster: the HTTP API of
// docs/http-api.md on -http, Raft on -raft, state under -data.
//
// With no flags it starts a single-node cluster on 127.0.0.1:7070, keeping
// its state in ./limitnode-data. Every flag can also be set with an
// environment variable LIMITNODE_<NAME> (LIMITNODE_HTTP, LIMITNODE_LOG_LEVEL,
// ...); a flag on the command line wins.
//
// A first argument that is not a flag names a subcommand: "limitnode token"
// makes an API token, "limitnode certs" a development CA and node
// certificates, "limitnode recover" rewrites a stopped node's membership
// after the cluster lost its quorum for good.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"maps"
	"net/http"
	"os"
	"os/signal"
	"slices"
	"strings"
	"syscall"
	"text/tabwriter"

	"github.com/limitnode/limitnode/client"
)

// Exit statuses.
const (
	exitOK    = 0
	exitError = 1
	exitUsage = 2
)

// subcommand runs one subcommand with its arguments.
type subcommand func(ctx context.Context, args []string, stdout, stderr io.Writer) error

// command is one command of the binary besides running a node: the word
// that names it, what it does (for -h), and either its run or the verbs
// it dispatches to by its next word ("limitnode policy put ...").
type command struct {
	name    string
	summary string
	run     subcommand
	verbs   map[string]subcommand
}

// commands are the commands besides running a node, in the order -h lists
// them: the one table that dispatch, subcommandFirst and the usage read.
var commands = []command{
	{name: "status", summary: "the cluster as one node sees it", run: statusCommand},
	{name: "members", summary: "the members, their roles, reachability and lag", run: membersCommand},
	{name: "join", summary: "add a running node to the cluster", run: joinCommand},
	{name: "remove", summary: "remove a member", run: removeCommand},
	{name: "transfer-leadership", summary: "hand leadership to another voter", run: transferCommand},
	{name: "allow", summary: "decide one request (exit 3 when denied)", run: allowCommand},
	{name: "settle", summary: "settle a reservation with what it cost", run: settleCommand},
	{name: "policy", summary: "stored policies", verbs: policyVerbs},
	{name: "keys", summary: "the state of keys, and resetting one", verbs: keysVerbs},
	{name: "blocks", summary: "blocked keys", verbs: blocksVerbs},
	{name: "audit", summary: "the operators' changes: who, what, when", run: auditCommand},
	{name: "rls", summary: "domains of Envoy's rate limit service", verbs: rlsVerbs},
	{name: "backup", summary: "write a backup of the cluster's state", run: backupCommand},
	{name: "restore", summary: "replace the cluster's state with a backup", run: restoreCommand},
	{name: "health", summary: "exit 0 when the node is ready, else say why", run: healthCommand},
	{name: "token", summary: "make an API token and its entry for the -auth file", run: tokenCommand},
	{name: "certs", summary: "make a development CA and node certificates", run: certsCommand},
	{name: "recover", summary: "rewrite a stopped node's membership after its cluster lost its quorum for good", run: recoverCommand},
	{name: "version", summary: "print the build of this binary", run: versionCommand},
}

// subcommands are the commands by name, each ready to run.
var subcommands = func() map[string]subcommand {
	byName := make(map[string]subcommand, len(commands))
	for _, c := range commands {
		byName[c.name] = c.run
		if c.verbs != nil {
			byName[c.name] = verbCommand(c.name, c.verbs)
		}
	}
	return byName
}()

// printCommands writes the commands' table for -h: each name (with its
// verbs) and summary.
func printCommands(w io.Writer) {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	for _, c := range commands {
		name := c.name
		if c.verbs != nil {
			name += " " + strings.Join(slices.Sorted(maps.Keys(c.verbs)), "|")
		}
		fmt.Fprintf(tw, "  %s\t%s\n", name, c.summary)
	}
	_ = tw.Flush()
}

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	os.Exit(dispatch(ctx, os.Args[1:], os.Getenv, os.Stdout, os.Stderr))
}

// dispatch runs the subcommand args name, or a node, and returns the exit
// status: 0, 1 on an error, 2 on a usage error.
func dispatch(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) int {
	var err error
	args = subcommandFirst(args)
	if len(args) > 0 && !strings.HasPrefix(args[0], "-") {
		cmd, ok := subcommands[args[0]]
		if !ok {
			fmt.Fprintf(stderr, "limitnode: unknown command %q; commands: %s (or flags only, to run a node; -h lists them)\n", args[0], strings.Join(slices.Sorted(maps.Keys(subcommands)), ", "))
			return exitUsage
		}
		err = cmd(ctx, args[1:], stdout, stderr)
	} else {
		err = run(ctx, args, getenv, stderr, nil)
	}
	var usage *usageError
	var status *statusError
	switch {
	case err == nil:
		return exitOK
	case errors.As(err, &status):
		return status.code
	case errors.Is(err, flag.ErrHelp):
		return exitOK
	case errors.As(err, &usage):
		if usage.msg != "" {
			fmt.Fprintln(stderr, "limitnode:", usage.msg)
		}
		return exitUsage
	default:
		// The client's errors name limitnode already.
		fmt.Fprintln(stderr, "limitnode: "+strings.TrimPrefix(err.Error(), "limitnode: ")+hint(err))
		return exitError
	}
}

// hint is what a person should try after err, for the answers whose fix
// lies in the command line.
func hint(err error) string {
	var apiErr *client.Error
	if !errors.As(err, &apiErr) {
		return ""
	}
	switch apiErr.StatusCode {
	case http.StatusUnauthorized:
		if errors.As(err, new(*tokenRefused)) {
			return " (the token given with -token or LIMITNODE_TOKEN is not one of the cluster's)"
		}
		return " (give an API token with -token or LIMITNODE_TOKEN)"
	case http.StatusForbidden:
		return " (the token lacks the role this command needs)"
	}
	return ""
}

// subcommandFirst moves a subcommand named after the common flags to the
// front ("limitnode -addr X status" is "limitnode status -addr X"), so it
// does not run a node. A node takes no positional arguments, so a word that
// is not the value of the flag before it can only be a subcommand.
func subcommandFirst(args []string) []string {
	for i, a := range args {
		if _, ok := subcommands[a]; !ok || strings.HasPrefix(a, "-") {
			continue
		}
		if i > 0 && takesValue(args[i-1]) {
			continue
		}
		return append([]string{a}, append(slices.Clone(args[:i]), args[i+1:]...)...)
	}
	return args
}

// takesValue reports whether arg is a flag, without "=value", whose value is
// the next argument: any flag but the boolean ones of a node and of the
// subcommands.
func takesValue(arg string) bool {
	if !strings.HasPrefix(arg, "-") || strings.Contains(arg, "=") {
		return false
	}
	switch strings.TrimLeft(arg, "-") {
	case "json", "no-sync", "pprof", "replace", "force", "h", "help":
		return false
	}
	return true
}

// usageError is a mistake in the command line; msg, when not empty, is
// what is left to say about it.
type usageError struct{ msg string }

func (e *usageError) Error() string { return e.msg }
