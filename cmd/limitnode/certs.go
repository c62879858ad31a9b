package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"

	"github.com/limitnode/limitnode/certs"
)

// certsCommand writes a development CA (or reuses the one in -dir) and a
// certificate and key per node, for local clusters and tests.
func certsCommand(_ context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("limitnode certs", flag.ContinueOnError)
	fs.SetOutput(stderr)
	dir := fs.String("dir", "certs", "directory to write ca.pem, ca-key.pem and NAME.pem, NAME-key.pem to")
	nodes := fs.String("nodes", "", "comma-separated node names (each certificate is valid for 127.0.0.1, ::1, localhost and the name)")
	hosts := fs.String("hosts", "", "comma-separated further DNS names (wildcards such as *.peers too) and IP addresses every certificate is valid for")
	fs.Usage = func() {
		fmt.Fprintf(stderr, "Usage: limitnode certs -dir DIR -nodes n1,n2,n3 [-hosts NAME,...]\n\nWrites a development CA and one certificate per node, usable for -node-cert and -tls-cert;\nproduction uses the organisation's CA.\n\n")
		fs.PrintDefaults()
	}
	if err := parseSubcommand(fs, args); err != nil {
		return err
	}
	names := commaList(*nodes)
	if len(names) == 0 {
		return &usageError{"-nodes names at least one node"}
	}
	files, err := certs.WriteDev(*dir, names, commaList(*hosts)...)
	if err != nil {
		return err
	}
	for _, name := range slices.Sorted(maps.Keys(files)) {
		fmt.Fprintf(stdout, "%-8s %s %s\n", name, files[name].Cert, files[name].Key)
	}
	return nil
}

// commaList splits a comma-separated flag value, dropping empty items.
func commaList(s string) []string {
	var out []string
	for item := range strings.SplitSeq(s, ",") {
		if item = strings.TrimSpace(item); item != "" {
			out = append(out, item)
		}
	}
	return out
}
