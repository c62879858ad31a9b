package main

import (
	"testing"

	"github.com/limitnode/limitnode/rls"
	"go.yaml.in/yaml/v3"
)

// TestBenchDomainDecidesEveryLoadsDescriptors checks that each descriptor a
// gRPC target sends matches a limit of benchDomain, the one its answers
// must carry: a descriptor that matches nothing is allowed uncounted, by
// limitnode and the reference alike, and would measure nothing.
func TestBenchDomainDecidesEveryLoadsDescriptors(t *testing.T) {
	t.Parallel()
	conf, perr := rls.Parse([]byte(benchDomain))
	if perr != nil {
		t.Fatal(perr)
	}
	domain, perr := rls.Compile(&conf)
	if perr != nil {
		t.Fatal(perr)
	}
	if conf.Domain != benchDomainName {
		t.Fatalf("domain %q, want %q", conf.Domain, benchDomainName)
	}
	for _, keys := range []string{"many", "hot"} {
		env := &environment{opts: options{keys: keys}}
		tests := []struct {
			name        string
			load        rlsLoad
			descriptors int
			perSecond   uint32
		}{
			{"one descriptor never denies", loadOne, 1, 1_000_000_000},
			{"two descriptors never deny", loadTwo, 2, 1_000_000_000},
			{"the flood allows floodRate a second", loadFlood, 1, floodRate},
		}
		for _, tt := range tests {
			for caller := range 2 * floodKeys {
				ds := tt.load.descriptors(env, caller, 7)
				if len(ds) != tt.descriptors {
					t.Fatalf("%s, keys %s: %d descriptors", tt.name, keys, len(ds))
				}
				for _, d := range ds {
					var entries []rls.Entry
					for _, e := range d.Entries {
						entries = append(entries, rls.Entry{Key: e.Key, Value: e.Value})
					}
					m := domain.Match(entries)
					if m.RateLimit == nil || m.RateLimit.Unit != "SECOND" || m.RateLimit.RequestsPerUnit != tt.perSecond || m.RateLimit.Algorithm != "" {
						t.Fatalf("%s, keys %s: %v matched %+v", tt.name, keys, entries, m.RateLimit)
					}
					if tt.load.requestsPerUnit() != tt.perSecond {
						t.Fatalf("%s: requestsPerUnit %d", tt.name, tt.load.requestsPerUnit())
					}
				}
			}
		}
	}
}

// TestBenchDomainUsesOnlyTheReferencesKeys walks benchDomain's YAML: the
// reference refuses a configuration with a key it does not know, such as
// limitnode's algorithm and burst, so the erl targets could not start.
func TestBenchDomainUsesOnlyTheReferencesKeys(t *testing.T) {
	t.Parallel()
	// The keys envoyproxy/ratelimit's configuration loader accepts.
	known := map[string]bool{
		"domain": true, "key": true, "value": true, "descriptors": true, "rate_limit": true,
		"unit": true, "requests_per_unit": true, "unlimited": true, "shadow_mode": true,
		"quota_mode": true, "name": true, "replaces": true, "detailed_metric": true,
		"value_to_metric": true, "share_threshold": true, "metadata": true,
	}
	var root yaml.Node
	if err := yaml.Unmarshal([]byte(benchDomain), &root); err != nil {
		t.Fatal(err)
	}
	var walk func(n *yaml.Node)
	walk = func(n *yaml.Node) {
		if n.Kind == yaml.MappingNode {
			for i := 0; i < len(n.Content); i += 2 {
				if k := n.Content[i].Value; !known[k] {
					t.Errorf("line %d: key %q, which the reference refuses", n.Content[i].Line, k)
				}
			}
		}
		for _, c := range n.Content {
			walk(c)
		}
	}
	walk(&root)
}
