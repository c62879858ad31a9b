package rls

import (
	"os"
	"path/filepath"
	"reflect"
	"testing"

	"go.yaml.in/yaml/v3"
	"pgregory.net/rapid"
)

// FuzzParse: Parse never panics; a configuration it accepts validates,
// compiles, matches its own descriptors without panicking, and comes back
// equal from yaml.v3's Marshal and Parse. The seeds are in
// testdata/fuzz/FuzzParse, the examples among them.
func FuzzParse(f *testing.F) {
	files, err := filepath.Glob(filepath.Join("testdata", "examples", "*.yaml"))
	if err != nil || len(files) == 0 {
		f.Fatalf("no examples: %v", err)
	}
	for _, file := range files {
		data, err := os.ReadFile(file)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(data)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		c, perr := Parse(data)
		if perr != nil {
			if perr.Message == "" {
				t.Fatalf("an error without a message: %#v", perr)
			}
			return
		}
		if err := c.Validate(); err != nil {
			t.Fatalf("Parse accepted what Validate refuses: %v", err)
		}
		d, err := Compile(&c)
		if err != nil {
			t.Fatalf("Parse accepted what Compile refuses: %v", err)
		}
		matchOwnDescriptors(t, d, d.Config().Descriptors, nil)
		out, merr := yaml.Marshal(&c)
		if merr != nil {
			t.Fatalf("Marshal: %v", merr)
		}
		back, perr := Parse(out)
		if perr != nil {
			t.Fatalf("Parse of the marshalled configuration: %v\n%s", perr, out)
		}
		if !reflect.DeepEqual(back, c) {
			t.Fatalf("the configuration changed through Marshal and Parse:\n%+v\n%+v\n%s", c, back, out)
		}
	})
}

// matchOwnDescriptors matches, for each descriptor of the tree, the request
// descriptor spelled by its path (a wildcard's pattern as the value). One
// whose entries all have values matches exactly, so matches its limit; an
// empty value may match a wildcard first.
func matchOwnDescriptors(t *testing.T, d *Domain, ds []Descriptor, prefix []Entry) {
	for _, desc := range ds {
		entries := append(prefix[:len(prefix):len(prefix)], Entry{desc.Key, desc.Value})
		m := d.Match(entries)
		exact := true
		for _, en := range entries {
			exact = exact && en.Value != ""
		}
		if exact && m.RateLimit != desc.RateLimit {
			t.Fatalf("%v matches %+v, not its own limit %+v", entries, m.RateLimit, desc.RateLimit)
		}
		if m.RateLimit != nil {
			_ = CounterKey(d.Config().Domain, entries, m.Shared)
			_, _ = Limit(m.RateLimit)
		}
		matchOwnDescriptors(t, d, desc.Descriptors, entries)
	}
}

// Any valid Config, with strings of any characters, comes back equal from
// yaml.v3's Marshal and Parse: what the Raft log holds can be shown as
// YAML and read again.
func TestMarshalParseRoundTrip(t *testing.T) {
	t.Parallel()
	str := rapid.OneOf(
		rapid.StringN(0, 20, -1),
		rapid.StringOfN(rapid.SampledFrom([]rune{' ', 'a', '0', ':', '#', '-', '?', '&', '*', '!', '|', '>', '\'', '"', '\\', '[', '{', ',', '%', '@', '`', '\uFEFF', '\u00A0', '\u3000', '\uFFFD', '😀'}), 0, 8, -1),
		rapid.SampledFrom([]string{"", "*", "a*b", "123", "0x1F", "1e3", "yes", "No", "on", "null", "~", "true", "-", "? x", "a: b", "#c", " lead", "trail ", "line\nbreak", "tab\t", "'q'", `"dq"`, "<<", "&a", "*a", "!tag", "2001-12-14", ".inf", "é"}),
	)
	u32 := func(v uint32) *uint32 { return &v }
	var desc func(depth int) *rapid.Generator[Descriptor]
	desc = func(depth int) *rapid.Generator[Descriptor] {
		return rapid.Custom(func(t *rapid.T) Descriptor {
			d := Descriptor{
				Key:            str.Draw(t, "key"),
				Value:          str.Draw(t, "value"),
				ShadowMode:     rapid.Bool().Draw(t, "shadow"),
				DetailedMetric: rapid.Bool().Draw(t, "detailed"),
				ShareThreshold: rapid.Bool().Draw(t, "share"),
			}
			if rapid.Bool().Draw(t, "limit") {
				rl := &RateLimit{
					Unit:            rapid.SampledFrom(unitNames).Draw(t, "unit"),
					RequestsPerUnit: rapid.Uint32Range(0, 1000).Draw(t, "rpu"),
					Name:            str.Draw(t, "name"),
					Algorithm:       rapid.SampledFrom([]string{"", "fixed_window", "token_bucket", "gcra", "sliding_window_counter"}).Draw(t, "algorithm"),
				}
				if rapid.Bool().Draw(t, "unlimited") {
					rl.Unlimited, rl.Unit = true, ""
				}
				if a, _ := parseAlgorithm(rl.Algorithm); a.IsBucket() && rapid.Bool().Draw(t, "burst") {
					rl.Burst = u32(rapid.Uint32Range(1, 1000).Draw(t, "burstValue"))
				}
				if rapid.Bool().Draw(t, "local_shares") {
					rl.LocalShares = &LocalShares{TTL: rapid.SampledFrom([]string{"", "10ms", "250ms", "1s", "2s", "soon"}).Draw(t, "ttl")}
					if rapid.Bool().Draw(t, "max_units") {
						rl.LocalShares.MaxUnits = u32(rapid.Uint32Range(0, 1000).Draw(t, "maxUnitsValue"))
					}
				}
				for range rapid.IntRange(0, 2).Draw(t, "replaces") {
					rl.Replaces = append(rl.Replaces, Replace{str.Draw(t, "replace")})
				}
				d.RateLimit = rl
			}
			if depth < 3 {
				d.Descriptors = rapid.SliceOfN(desc(depth+1), 0, 2).Draw(t, "children")
				if len(d.Descriptors) == 0 {
					d.Descriptors = nil
				}
			}
			return d
		})
	}
	rapid.Check(t, func(t *rapid.T) {
		c := Config{Domain: str.Draw(t, "domain"), Descriptors: rapid.SliceOfN(desc(1), 0, 3).Draw(t, "descriptors")}
		if len(c.Descriptors) == 0 {
			c.Descriptors = nil
		}
		if c.Validate() != nil {
			t.Skip("not valid")
		}
		out, err := yaml.Marshal(&c)
		if err != nil {
			t.Fatalf("Marshal: %v", err)
		}
		back, perr := Parse(out)
		if perr != nil {
			t.Fatalf("Parse: %v\n%s", perr, out)
		}
		if !reflect.DeepEqual(back, c) {
			t.Fatalf("changed:\n%#v\n%#v\n%s", c, back, out)
		}
	})
}
