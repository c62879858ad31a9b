package main

import (
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// updateDocs makes TestConfigurationPageListsEveryFlag write the tables
// instead of comparing them.
var updateDocs = flag.Bool("update-docs", false, "rewrite the generated tables of docs/configuration.md")

// configurationPage is the page whose flag tables are generated.
var configurationPage = filepath.Join(repoRoot, "docs", "configuration.md")

// generatedTable is a table of docs/configuration.md between two marker
// lines, and the flag set it lists.
type generatedTable struct {
	start, end string
	flags      func() *flag.FlagSet
	env        func(*flag.Flag) string // the variable that sets the flag
}

var generatedTables = []generatedTable{
	{
		start: "<!-- flags: generated from cmd/limitnode/config.go; do not edit by hand -->",
		end:   "<!-- end of the generated flags -->",
		flags: func() *flag.FlagSet { var c config; return c.flagSet(io.Discard) },
		env:   func(f *flag.Flag) string { return envName(f.Name) },
	},
	{
		start: "<!-- cli flags: generated from cmd/limitnode/cli.go; do not edit by hand -->",
		end:   "<!-- end of the generated cli flags -->",
		flags: func() *flag.FlagSet { return remoteFlagSet(func(string) string { return "" }) },
		env:   remoteFlagVariable,
	},
}

// remoteFlagSet is the flags every cluster subcommand takes, their
// defaults read through getenv.
func remoteFlagSet(getenv func(string) string) *flag.FlagSet {
	fs := flag.NewFlagSet("limitnode COMMAND", flag.ContinueOnError)
	var rf remoteFlags
	rf.add(fs, getenv, 10*time.Second)
	return fs
}

// remoteFlagVariable is the variable a subcommand's flag takes its default
// from, found by asking the code: each variable it reads names itself.
func remoteFlagVariable(f *flag.Flag) string {
	const mark = "variable:"
	g := remoteFlagSet(func(name string) string { return mark + name })
	if v, ok := strings.CutPrefix(g.Lookup(f.Name).DefValue, mark); ok {
		return v
	}
	return ""
}

// render is the table's Markdown: one row per flag, in name order.
func (g generatedTable) render() string {
	var b strings.Builder
	b.WriteString("| flag | variable | default | meaning |\n|---|---|---|---|\n")
	g.flags().VisitAll(func(f *flag.Flag) {
		def := "`" + f.DefValue + "`"
		switch f.DefValue {
		case "":
			def = "none"
		case "false":
			def = "off"
		}
		env := "none"
		if e := g.env(f); e != "" {
			env = "`" + e + "`"
		}
		fmt.Fprintf(&b, "| `-%s` | %s | %s | %s |\n", f.Name, env, def, strings.ReplaceAll(f.Usage, "|", `\|`))
	})
	return b.String()
}

// TestConfigurationPageListsEveryFlag: the flag tables of
// docs/configuration.md are what the flag sets of the code say, every flag
// with its variable, default and meaning. With -update-docs it writes them.
func TestConfigurationPageListsEveryFlag(t *testing.T) {
	data, err := os.ReadFile(configurationPage)
	if err != nil {
		t.Fatal(err)
	}
	page := string(data)
	for _, g := range generatedTables {
		before, rest, ok := strings.Cut(page, g.start+"\n")
		current, after, ok2 := strings.Cut(rest, g.end+"\n")
		if !ok || !ok2 {
			t.Fatalf("docs/configuration.md lacks the lines %q and %q around its table", g.start, g.end)
		}
		want := g.render()
		if current != want {
			if !*updateDocs {
				t.Errorf("docs/configuration.md differs from the flags of the code (go test ./cmd/limitnode -run ConfigurationPage -update-docs rewrites it); want:\n%s", want)
			}
			page = before + g.start + "\n" + want + g.end + "\n" + after
		}
	}
	if *updateDocs && page != string(data) {
		if err := os.WriteFile(configurationPage, []byte(page), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}
