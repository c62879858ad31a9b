package main

import (
	"flag"
	"io"
	"log/slog"
	"os"
	"slices"
	"strings"
)

// A node reads LIMITNODE_<FLAG> for each of its flags, and the commands
// LIMITNODE_ADDR, LIMITNODE_TOKEN and LIMITNODE_CA; a mistyped name
// (LIMITNODE_LOG_LEVLE) would be ignored without a word, so each
// LIMITNODE_ variable that nothing reads is named in a warning, with the
// known name nearest to it. Values are never repeated: one may be a token.

// envPrefix begins the name of every variable limitnode reads.
const envPrefix = "LIMITNODE_"

// otherVariables are the LIMITNODE_ variables besides the node's flags:
// the commands' own, and those that this repository's tests and
// deployment files set where nodes run, for other programs.
var otherVariables = []string{
	"LIMITNODE_ADDR", "LIMITNODE_TOKEN", "LIMITNODE_CA", // the commands' -addr, -token and -ca
	"LIMITNODE_BIN", "LIMITNODE_TEST_LOG", "LIMITNODE_TEST_SECURE", // the tests'
	"LIMITNODE_SECRETS_GID", "LIMITNODE_STATUS_TOKEN", // deploy/docker-compose.yml's and docs/security.md's
}

// environ lists the process's environment as NAME=value strings.
var environ = os.Environ

// knownVariables are the LIMITNODE_ variables that something reads.
func knownVariables() []string {
	var c config
	known := slices.Clone(otherVariables)
	c.flagSet(io.Discard).VisitAll(func(f *flag.Flag) { known = append(known, envName(f.Name)) })
	return known
}

// unknownVariable is a LIMITNODE_ variable that nothing reads, and the
// known name nearest to it ("" when none is near).
type unknownVariable struct{ name, nearest string }

// unknownVariables finds the LIMITNODE_ variables of env (NAME=value
// strings) that are not among known.
func unknownVariables(env, known []string) []unknownVariable {
	var out []unknownVariable
	for _, kv := range env {
		name, _, _ := strings.Cut(kv, "=")
		if !strings.HasPrefix(name, envPrefix) || slices.Contains(known, name) {
			continue
		}
		out = append(out, unknownVariable{name: name, nearest: nearestName(name, known)})
	}
	return out
}

// nearestName is the name of known at the least edit distance from name,
// if that is small for its length (the prefix aside), else "".
func nearestName(name string, known []string) string {
	best, bestDistance := "", 1+len(strings.TrimPrefix(name, envPrefix))/4
	for _, k := range known {
		if d := editDistance(name, k); d <= bestDistance && (best == "" || d < bestDistance) {
			best, bestDistance = k, d
		}
	}
	return best
}

// warnUnknownVariables logs a warning for each LIMITNODE_ variable of the
// environment that nothing reads.
func warnUnknownVariables(logger *slog.Logger) {
	for _, u := range unknownVariables(environ(), knownVariables()) {
		if u.nearest != "" {
			logger.Warn("ignored an environment variable that no flag reads: is it a typo?", "variable", u.name, "did_you_mean", u.nearest)
			continue
		}
		logger.Warn("ignored an environment variable that no flag reads", "variable", u.name, "flags", "limitnode -h lists the flags; each is also LIMITNODE_<NAME>")
	}
}

// didYouMean suggests the nearest known name, if any.
func (u unknownVariable) didYouMean() string {
	if u.nearest == "" {
		return ""
	}
	return "; did you mean " + u.nearest + "?"
}
