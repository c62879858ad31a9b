package main

import (
	"context"
	"flag"
	"fmt"
	"io"

	"github.com/limitnode/limitnode/internal/buildinfo"
)

// versionCommand prints the build of this binary (buildinfo.Version).
func versionCommand(_ context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("limitnode version", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprintf(stderr, "Usage: limitnode version\n\nPrints the version of this binary: a release, or devel with the commit it was built from.\n")
	}
	if err := parseSubcommand(fs, args); err != nil {
		return err
	}
	fmt.Fprintln(stdout, "limitnode", buildinfo.Version())
	return nil
}
