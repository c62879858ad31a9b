package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"slices"
	"strings"
)

// parseFlags parses args with fs. -h prints fs's usage and returns
// flag.ErrHelp; a mistake is a *usageError of one line that names the
// flags closest to an unknown one (by edit distance) and the command that
// lists them all, instead of the flag package's usage dump, in which the
// mistake scrolls out of sight.
func parseFlags(fs *flag.FlagSet, args []string) error {
	usage, output := fs.Usage, fs.Output()
	fs.Usage = func() {}
	fs.SetOutput(io.Discard)
	err := fs.Parse(args)
	fs.Usage = usage
	fs.SetOutput(output)
	switch {
	case err == nil:
		return nil
	case errors.Is(err, flag.ErrHelp):
		fs.Usage()
		return err
	}
	msg := err.Error()
	if name, ok := strings.CutPrefix(msg, "flag provided but not defined: -"); ok {
		if near := closestFlags(fs, strings.TrimPrefix(name, "-")); len(near) > 0 {
			msg += "; did you mean -" + strings.Join(near, " or -") + "?"
		}
	}
	return &usageError{fmt.Sprintf("%s (%s -h lists the flags)", msg, fs.Name())}
}

// closestFlags returns the names of fs's flags nearest to name: those at
// the least edit distance, if it is small for name's length, else those
// that name begins (at most three).
func closestFlags(fs *flag.FlagSet, name string) []string {
	best, maxDistance := -1, 1+len(name)/4
	var nearest, extending []string
	fs.VisitAll(func(f *flag.Flag) {
		if strings.HasPrefix(f.Name, name) {
			extending = append(extending, f.Name)
		}
		d := editDistance(strings.ToLower(name), f.Name)
		switch {
		case d > maxDistance || (best >= 0 && d > best):
		case d == best:
			nearest = append(nearest, f.Name)
		default:
			best, nearest = d, []string{f.Name}
		}
	})
	if len(nearest) == 0 && len(extending) <= 3 {
		nearest = extending
	}
	slices.Sort(nearest)
	return nearest
}

// editDistance is the optimal string alignment distance between a and b:
// the fewest insertions, deletions, substitutions and swaps of two
// neighbouring bytes that turn one into the other ("jion" is 1 from
// "join").
func editDistance(a, b string) int {
	// rows[i][j] is the distance between a[:i] and b[:j].
	rows := make([][]int, len(a)+1)
	for i := range rows {
		rows[i] = make([]int, len(b)+1)
		rows[i][0] = i
	}
	for j := range rows[0] {
		rows[0][j] = j
	}
	for i := 1; i <= len(a); i++ {
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			rows[i][j] = min(rows[i-1][j]+1, rows[i][j-1]+1, rows[i-1][j-1]+cost)
			if i > 1 && j > 1 && a[i-1] == b[j-2] && a[i-2] == b[j-1] {
				rows[i][j] = min(rows[i][j], rows[i-2][j-2]+1)
			}
		}
	}
	return rows[len(a)][len(b)]
}
