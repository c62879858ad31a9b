package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"strings"

	"github.com/limitnode/limitnode/auth"
)

// tokenCommand prints a new random API token and its entry for a token file
// (-auth): the token on the first line, to hand to the client, and the entry,
// which holds only the token's SHA-256, on the second.
func tokenCommand(_ context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("limitnode token", flag.ContinueOnError)
	fs.SetOutput(stderr)
	name := fs.String("name", "client", "the token's name in the file and in logs")
	roles := fs.String("roles", "decide", "comma-separated roles: decide, read, admin")
	fs.Usage = func() {
		fmt.Fprintf(stderr, "Usage: limitnode token [-name NAME] [-roles decide,read,admin]\n\nPrints a new token, then its line for the -auth token file.\n\n")
		fs.PrintDefaults()
	}
	if err := parseSubcommand(fs, args); err != nil {
		return err
	}
	token, hash := auth.NewToken()
	entry := struct {
		Name   string      `json:"name"`
		SHA256 string      `json:"sha256"`
		Roles  []auth.Role `json:"roles"`
	}{Name: *name, SHA256: hash}
	for r := range strings.SplitSeq(*roles, ",") {
		entry.Roles = append(entry.Roles, auth.Role(strings.TrimSpace(r)))
	}
	line, err := json.Marshal(entry)
	if err != nil {
		return err
	}
	// The entry is checked as the node will read it, so a typo in a role
	// is caught here rather than at the node's start.
	if _, err := auth.Parse(strings.NewReader(`{"tokens": [` + string(line) + `]}`)); err != nil {
		return &usageError{err.Error()}
	}
	_, err = fmt.Fprintf(stdout, "%s\n%s\n", token, line)
	return err
}

// parseSubcommand parses a subcommand's flags; a mistake is a *usageError.
func parseSubcommand(fs *flag.FlagSet, args []string) error {
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return &usageError{fmt.Sprintf("unexpected arguments: %q", fs.Args())}
	}
	return nil
}
