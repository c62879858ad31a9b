package main

import (
	"context"
	"fmt"
	"io"

	"github.com/limitnode/limitnode/rls"
	"go.yaml.in/yaml/v3"
)

// rlsVerbs are the verbs of limitnode rls (put|get|list|delete): the configurations of the
// Envoy rate limit service, one per domain, in envoyproxy/ratelimit's YAML.
var rlsVerbs = map[string]subcommand{"put": rlsPut, "get": rlsGet, "list": rlsList, "delete": rlsDelete}

var rlsPut = remoteCommand("rls put", "rls put FILE ('-': standard input; envoyproxy/ratelimit's YAML of one domain) [flags]", noFlags(func(ctx context.Context, r *remote, args []string) error {
	if err := wantArgs(args, 1, "FILE"); err != nil {
		return err
	}
	in, err := openInput(args[0])
	if err != nil {
		return err
	}
	defer in.Close()
	data, err := io.ReadAll(io.LimitReader(in, rls.MaxConfigBytes+1))
	if err != nil {
		return fmt.Errorf("read %s: %w", args[0], err)
	}
	c, perr := rls.Parse(data)
	if perr != nil {
		return fmt.Errorf("%s: %w", args[0], perr)
	}
	out, err := r.client.PutRLSConfig(ctx, c)
	if err != nil {
		return err
	}
	return r.rlsConfig(out)
}))

var rlsGet = remoteCommand("rls get", "rls get DOMAIN [flags] (YAML; -json for JSON)", noFlags(func(ctx context.Context, r *remote, args []string) error {
	if err := wantArgs(args, 1, "DOMAIN"); err != nil {
		return err
	}
	c, err := r.client.GetRLSConfig(ctx, args[0])
	if err != nil {
		return err
	}
	return r.rlsConfig(c)
}))

var rlsList = remoteCommand("rls list", "rls list [flags]", noFlags(func(ctx context.Context, r *remote, args []string) error {
	if err := wantArgs(args, 0, "no arguments"); err != nil {
		return err
	}
	domains, err := r.client.ListRLSDomains(ctx)
	if err != nil {
		return err
	}
	if r.json {
		return r.printJSON(map[string][]string{"domains": domains})
	}
	for _, d := range domains {
		fmt.Fprintln(r.stdout, d)
	}
	return nil
}))

var rlsDelete = remoteCommand("rls delete", "rls delete DOMAIN [flags]", noFlags(func(ctx context.Context, r *remote, args []string) error {
	if err := wantArgs(args, 1, "DOMAIN"); err != nil {
		return err
	}
	if err := r.client.DeleteRLSConfig(ctx, args[0]); err != nil {
		return err
	}
	fmt.Fprintf(r.stdout, "deleted %s\n", args[0])
	return nil
}))

// rlsConfig prints a configuration: YAML, or JSON with -json.
func (r *remote) rlsConfig(c rls.Config) error {
	if r.json {
		return r.printJSON(c)
	}
	out, err := yaml.Marshal(&c)
	if err != nil {
		return fmt.Errorf("encode the configuration as YAML: %w", err)
	}
	_, err = r.stdout.Write(out)
	return err
}
