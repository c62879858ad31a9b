package main

import (
	"cmp"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/limitnode/limitnode/client"
)

// The subcommands that talk to a running cluster over its HTTP API, as
// etcdctl and the rqlite shell do: -addr (several, tried in turn), -token,
// -ca, -json. Human output is a short aligned table; an error is one line.

// exitDenied is allow's exit status when the request was denied.
const exitDenied = 3

// errDenied makes allow exit with exitDenied, having printed the decision.
var errDenied = &statusError{code: exitDenied}

// statusError ends a subcommand with its own exit status, having printed
// what it had to.
type statusError struct{ code int }

func (e *statusError) Error() string { return fmt.Sprintf("exit status %d", e.code) }

// remote is what every cluster subcommand is given: its flags parsed, a
// client, and where to write.
type remote struct {
	client  *client.Client
	json    bool
	stdout  io.Writer
	timeout time.Duration
}

// remoteFlags adds the common flags to fs, their defaults from LIMITNODE_ADDR,
// LIMITNODE_TOKEN and LIMITNODE_CA.
type remoteFlags struct {
	addr, token, ca string
	json            bool
	timeout         time.Duration
}

func (f *remoteFlags) add(fs *flag.FlagSet, getenv func(string) string, timeout time.Duration) {
	fs.StringVar(&f.addr, "addr", cmp.Or(getenv("LIMITNODE_ADDR"), "127.0.0.1:7070"), "HTTP addresses of nodes, comma-separated, tried in turn (env LIMITNODE_ADDR)")
	fs.StringVar(&f.token, "token", getenv("LIMITNODE_TOKEN"), "API token (env LIMITNODE_TOKEN)")
	fs.StringVar(&f.ca, "ca", getenv("LIMITNODE_CA"), "PEM CA to trust for HTTPS; addresses without a scheme are then https:// (env LIMITNODE_CA)")
	fs.BoolVar(&f.json, "json", false, "print the API's JSON answer instead of a table")
	fs.DurationVar(&f.timeout, "timeout", timeout, "how long to wait for the whole answer; 0 for no limit")
}

// remote builds the client of the parsed flags.
func (f *remoteFlags) remote(stdout io.Writer) (*remote, error) {
	opts := client.Options{Token: f.token}
	if f.ca != "" {
		data, err := os.ReadFile(f.ca)
		if err != nil {
			return nil, fmt.Errorf("-ca: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(data) {
			return nil, fmt.Errorf("-ca: %s holds no PEM certificate", f.ca)
		}
		opts.TLS = &tls.Config{MinVersion: tls.VersionTLS12, RootCAs: pool}
	}
	var addrs []string
	for a := range strings.SplitSeq(f.addr, ",") {
		if a = strings.TrimSpace(a); a != "" {
			addrs = append(addrs, a)
		}
	}
	if len(addrs) == 0 {
		return nil, &usageError{"-addr names no address"}
	}
	return &remote{client: client.NewWithOptions(opts, addrs...), json: f.json, stdout: stdout, timeout: f.timeout}, nil
}

// runRemote is a cluster subcommand's work, given the parsed remote and
// the positional arguments.
type runRemote func(ctx context.Context, r *remote, args []string) error

// remoteCommand makes a cluster subcommand: build adds the command's own
// flags to fs (fresh for each run) and returns its work, which gets 10 s
// by default (-timeout).
func remoteCommand(name, usage string, build func(fs *flag.FlagSet) runRemote) subcommand {
	return timedCommand(name, usage, 10*time.Second, build)
}

// backupTransferCommand is remoteCommand for a command that moves a backup, which
// may take long: no time limit unless -timeout gives one.
func backupTransferCommand(name, usage string, build func(fs *flag.FlagSet) runRemote) subcommand {
	return timedCommand(name, usage, 0, build)
}

func timedCommand(name, usage string, timeout time.Duration, build func(fs *flag.FlagSet) runRemote) subcommand {
	return func(ctx context.Context, args []string, stdout, stderr io.Writer) error {
		fs := flag.NewFlagSet("limitnode "+name, flag.ContinueOnError)
		fs.SetOutput(stderr)
		var rf remoteFlags
		rf.add(fs, os.Getenv, timeout)
		run := build(fs)
		fs.Usage = func() {
			fmt.Fprintf(stderr, "Usage: limitnode %s\n\n", usage)
			fs.PrintDefaults()
		}
		positional, err := parseInterspersed(fs, args)
		if err != nil {
			return err
		}
		for _, u := range unknownVariables(environ(), knownVariables()) {
			fmt.Fprintf(stderr, "limitnode: warning: ignored %s, which nothing reads%s\n", u.name, u.didYouMean())
		}
		r, err := rf.remote(stdout)
		if err != nil {
			return err
		}
		if r.timeout > 0 {
			var cancel context.CancelFunc
			ctx, cancel = context.WithTimeout(ctx, r.timeout)
			defer cancel()
		}
		err = run(ctx, r, positional)
		if apiErr := (*client.Error)(nil); rf.token != "" && errors.As(err, &apiErr) && apiErr.StatusCode == http.StatusUnauthorized {
			return &tokenRefused{err}
		}
		return err
	}
}

// tokenRefused is a 401 answered to a command that gave a token: the
// cluster knows no such token.
type tokenRefused struct{ error }

func (e *tokenRefused) Unwrap() error { return e.error }

// parseInterspersed parses flags wherever they stand among the positional
// arguments ("policy get NAME -addr X" as well as "policy get -addr X
// NAME"), returning the positional ones; "--" ends the flags.
func parseInterspersed(fs *flag.FlagSet, args []string) ([]string, error) {
	var positional []string
	for {
		if err := parseFlags(fs, args); err != nil {
			return nil, err
		}
		rest := fs.Args()
		if len(rest) == 0 {
			return positional, nil
		}
		if len(args) > len(rest) && args[len(args)-len(rest)-1] == "--" {
			return append(positional, rest...), nil
		}
		positional = append(positional, rest[0])
		args = rest[1:]
	}
}

// noFlags is build for a command without flags of its own.
func noFlags(run runRemote) func(*flag.FlagSet) runRemote {
	return func(*flag.FlagSet) runRemote { return run }
}

// printJSON prints v as indented JSON.
func (r *remote) printJSON(v any) error {
	enc := json.NewEncoder(r.stdout)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

// table prints rows aligned under a header.
func (r *remote) table(header string, rows [][]string) error {
	tw := tabwriter.NewWriter(r.stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, header)
	for _, row := range rows {
		fmt.Fprintln(tw, strings.Join(row, "\t"))
	}
	return tw.Flush()
}

// wantArgs checks the number of positional arguments.
func wantArgs(args []string, n int, what string) error {
	if len(args) != n {
		return &usageError{fmt.Sprintf("want %s, got %q", what, args)}
	}
	return nil
}
