package rls

import (
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/limitnode/limitnode/algorithms"
	"github.com/limitnode/limitnode/contract"
	"pgregory.net/rapid"
)

func TestUnitPeriod(t *testing.T) {
	t.Parallel()
	day := 24 * time.Hour
	tests := []struct {
		unit string
		want time.Duration
		ok   bool
	}{
		{"SECOND", time.Second, true},
		{"second", time.Second, true},
		{"Minute", time.Minute, true},
		{"HOUR", time.Hour, true},
		{"DAY", day, true},
		{"WEEK", 7 * day, true},
		{"MONTH", 30 * day, true},
		{"YEAR", 365 * day, true},
		{"", 0, false},
		{"UNKNOWN", 0, false},
		{"SECONDS", 0, false},
		{"SECON", 0, false},
		{"1s", 0, false},
		{"ſecond", 0, false},
	}
	for _, tt := range tests {
		got, ok := UnitPeriod(tt.unit)
		if got != tt.want || ok != tt.ok {
			t.Errorf("UnitPeriod(%q) = %v, %v; want %v, %v", tt.unit, got, ok, tt.want, tt.ok)
		}
	}
}

func TestLimit(t *testing.T) {
	t.Parallel()
	u32 := func(v uint32) *uint32 { return &v }
	tests := []struct {
		name string
		rl   *RateLimit
		want algorithms.Limit
		ok   bool
	}{
		{"the reference's fixed window", &RateLimit{Unit: "MINUTE", RequestsPerUnit: 10},
			algorithms.Limit{Algorithm: algorithms.FixedWindow, Rate: 10, Period: time.Minute}, true},
		{"a unit in lower case", &RateLimit{Unit: "hour", RequestsPerUnit: 1},
			algorithms.Limit{Algorithm: algorithms.FixedWindow, Rate: 1, Period: time.Hour}, true},
		{"a bucket's burst is requests_per_unit", &RateLimit{Unit: "SECOND", RequestsPerUnit: 5, Algorithm: "token_bucket"},
			algorithms.Limit{Algorithm: algorithms.TokenBucket, Rate: 5, Period: time.Second, Burst: 5}, true},
		{"a bucket's burst given", &RateLimit{Unit: "DAY", RequestsPerUnit: 5, Algorithm: "gcra", Burst: u32(50)},
			algorithms.Limit{Algorithm: algorithms.GCRA, Rate: 5, Period: 24 * time.Hour, Burst: 50}, true},
		{"a window has no burst", &RateLimit{Unit: "WEEK", RequestsPerUnit: 5, Algorithm: "sliding_window_counter"},
			algorithms.Limit{Algorithm: algorithms.SlidingWindowCounter, Rate: 5, Period: 7 * 24 * time.Hour}, true},
		{"a year", &RateLimit{Unit: "YEAR", RequestsPerUnit: 1},
			algorithms.Limit{Algorithm: algorithms.FixedWindow, Rate: 1, Period: 365 * 24 * time.Hour}, true},
		{"nil", nil, algorithms.Limit{}, false},
		{"0 requests", &RateLimit{Unit: "SECOND"}, algorithms.Limit{}, false},
		{"unlimited", &RateLimit{Unlimited: true, RequestsPerUnit: 5}, algorithms.Limit{}, false},
		{"an unknown unit", &RateLimit{Unit: "EON", RequestsPerUnit: 5}, algorithms.Limit{}, false},
		{"an unknown algorithm", &RateLimit{Unit: "SECOND", RequestsPerUnit: 5, Algorithm: "magic"}, algorithms.Limit{}, false},
	}
	for _, tt := range tests {
		got, ok := Limit(tt.rl)
		if got != tt.want || ok != tt.ok {
			t.Errorf("%s: Limit = %+v, %v; want %+v, %v", tt.name, got, ok, tt.want, tt.ok)
		}
		if ok {
			if err := contract.ValidateLimit(got); err != nil {
				t.Errorf("%s: the limit is not valid: %v", tt.name, err)
			}
		}
	}
}

// Every limit of every example is valid.
func TestExampleLimitsAreValid(t *testing.T) {
	t.Parallel()
	for n := 1; n <= 11; n++ {
		var walk func([]Descriptor)
		walk = func(ds []Descriptor) {
			for _, d := range ds {
				if l, ok := Limit(d.RateLimit); ok {
					if err := contract.ValidateLimit(l); err != nil {
						t.Errorf("example %d, %s: %v", n, d.Key, err)
					}
				}
				walk(d.Descriptors)
			}
		}
		walk(example(t, n).Config().Descriptors)
	}
}

// decodeCounterKey reads a CounterKey back: the domain, then keys and
// values.
func decodeCounterKey(k string) (domain string, entries []Entry, ok bool) {
	var parts []string
	for k != "" {
		colon := strings.IndexByte(k, ':')
		if colon < 1 {
			return "", nil, false
		}
		n, err := strconv.Atoi(k[:colon])
		if err != nil || n < 0 || n > len(k)-colon-1 || strconv.Itoa(n) != k[:colon] {
			return "", nil, false
		}
		parts = append(parts, k[colon+1:colon+1+n])
		k = k[colon+1+n:]
	}
	if len(parts)%2 != 1 {
		return "", nil, false
	}
	for i := 1; i < len(parts); i += 2 {
		entries = append(entries, Entry{parts[i], parts[i+1]})
	}
	return parts[0], entries, true
}

// effective is what a counter key stands for: the entries with each shared
// value in place.
func effective(entries []Entry, shared []string) []Entry {
	out := append([]Entry(nil), entries...)
	for i := range out {
		if i < len(shared) && shared[i] != "" {
			out[i].Value = shared[i]
		}
	}
	return out
}

// CounterKey is injective: it can be read back into the domain and entries
// (shared values in place), and two inputs with one key stand for the same
// counter. The strings are drawn from a small alphabet of the characters
// that could confuse an encoding, so that near-collisions are frequent.
func TestCounterKeyIsInjective(t *testing.T) {
	t.Parallel()
	str := rapid.StringOfN(rapid.SampledFrom([]rune{'a', '1', '0', ':', '_', '.', '*', '\\', 0, 'é'}), 0, 12, -1)
	input := rapid.Custom(func(t *rapid.T) struct {
		domain  string
		entries []Entry
		shared  []string
	} {
		n := rapid.IntRange(0, 4).Draw(t, "n")
		entries := make([]Entry, n)
		for i := range entries {
			entries[i] = Entry{str.Draw(t, "key"), str.Draw(t, "value")}
		}
		var shared []string
		if rapid.Bool().Draw(t, "shared") {
			shared = rapid.SliceOfN(str, 0, n+1).Draw(t, "patterns")
		}
		return struct {
			domain  string
			entries []Entry
			shared  []string
		}{str.Draw(t, "domain"), entries, shared}
	})
	rapid.Check(t, func(t *rapid.T) {
		a, b := input.Draw(t, "a"), input.Draw(t, "b")
		ka := CounterKey(a.domain, a.entries, a.shared)
		kb := CounterKey(b.domain, b.entries, b.shared)
		domain, entries, ok := decodeCounterKey(ka)
		if !ok || domain != a.domain || !slices.Equal(entries, effective(a.entries, a.shared)) {
			t.Fatalf("CounterKey %q reads back as %q %q (%v)", ka, domain, entries, ok)
		}
		sameInput := a.domain == b.domain && slices.Equal(effective(a.entries, a.shared), effective(b.entries, b.shared))
		if (ka == kb) != sameInput {
			t.Fatalf("keys %q and %q for %+v and %+v", ka, kb, a, b)
		}
	})
}

func TestCounterKeyExamples(t *testing.T) {
	tests := []struct {
		domain  string
		entries []Entry
		shared  []string
		want    string
	}{
		{"shop", e("api", "read"), nil, "4:shop3:api4:read"},
		{"d", e("k", ""), nil, "1:d1:k0:"},
		{"d", e("a", "b", "c", "d"), []string{"", "x*"}, "1:d1:a1:b1:c2:x*"},
		{"d", nil, nil, "1:d"},
		{"d", e("k", "v"), []string{"", "ignored"}, "1:d1:k1:v"},
	}
	for _, tt := range tests {
		if got := CounterKey(tt.domain, tt.entries, tt.shared); got != tt.want {
			t.Errorf("CounterKey(%q, %v, %q) = %q, want %q", tt.domain, tt.entries, tt.shared, got, tt.want)
		}
	}
	entries := e("k1", "v1", "k2", "v2")
	if n := testing.AllocsPerRun(100, func() { CounterKey("domain", entries, nil) }); n > 1 {
		t.Errorf("CounterKey allocates %v times", n)
	}
}
