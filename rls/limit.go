package rls

import (
	"strconv"
	"strings"
	"time"

	"github.com/limitnode/limitnode/algorithms"
)

// unitPeriods are the periods of unitNames, as the reference's
// UnitToDivider: a month is 30 days and a year 365.
var unitPeriods = []time.Duration{
	time.Second,
	time.Minute,
	time.Hour,
	24 * time.Hour,
	7 * 24 * time.Hour,
	30 * 24 * time.Hour,
	365 * 24 * time.Hour,
}

// UnitPeriod is the period of a unit: SECOND 1s, MINUTE 60s, HOUR 3600s,
// DAY 86400s, WEEK 7 days, MONTH 30 days, YEAR 365 days. The unit's case
// does not matter (ASCII letters only); ok is false for any other unit, "" included.
func UnitPeriod(unit string) (period time.Duration, ok bool) {
	if i := unitIndex(unit); i >= 0 {
		return unitPeriods[i], true
	}
	return 0, false
}

// unitIndex is the index of unit in unitNames, ignoring ASCII case, or -1.
func unitIndex(unit string) int {
	for i, name := range unitNames {
		if len(unit) != len(name) {
			continue
		}
		j := 0
		for j < len(unit) && unit[j]&^0x20 == name[j] {
			j++
		}
		if j == len(unit) {
			return i
		}
	}
	return -1
}

// canonicalUnit is unit in upper case when it is a unit, else unit as it
// is.
func canonicalUnit(unit string) string {
	if i := unitIndex(unit); i >= 0 {
		return unitNames[i]
	}
	return unit
}

// Limit turns a rate_limit into the limit limitnode decides with: its
// algorithm (fixed_window when none is named), Rate = RequestsPerUnit,
// Period = the unit's period (UnitPeriod), and Burst = *Burst or
// RequestsPerUnit for the bucket algorithms, 0 for the window algorithms.
//
// ok is false, and l the zero Limit, when no limit is to be decided: rl is
// nil, unlimited, or has RequestsPerUnit 0 (the reference then refuses every
// request, so the caller denies without keeping state); also when its unit
// or algorithm is unknown, which a validated rate_limit never has. l is
// valid (contract.ValidateLimit) for a rate_limit that passed validation.
func Limit(rl *RateLimit) (l algorithms.Limit, ok bool) {
	if rl == nil || rl.Unlimited || rl.RequestsPerUnit == 0 {
		return algorithms.Limit{}, false
	}
	period, ok := UnitPeriod(rl.Unit)
	if !ok {
		return algorithms.Limit{}, false
	}
	alg, ok := parseAlgorithm(rl.Algorithm)
	if !ok {
		return algorithms.Limit{}, false
	}
	l = algorithms.Limit{Algorithm: alg, Rate: int64(rl.RequestsPerUnit), Period: period}
	if alg.IsBucket() {
		l.Burst = l.Rate
		if rl.Burst != nil {
			l.Burst = int64(*rl.Burst)
		}
	}
	return l, true
}

// CounterKey is the key of the counter that a matched request descriptor
// counts on: the domain, then each entry's key and value, where a value is
// replaced by shared[i] when shared has an i-th element that is not ""
// (Match.Shared, share_threshold). shared may be nil or shorter than
// entries.
//
// Every string is written as its length in decimal, ':' and its bytes, so no
// two different (domain, entries) give one key: "4:shop3:api4:read" is
// domain "shop" with entry ("api", "read"). The key is not prefixed; the
// caller stores it as it needs.
func CounterKey(domain string, entries []Entry, shared []string) string {
	value := func(i int) string {
		if i < len(shared) && shared[i] != "" {
			return shared[i]
		}
		return entries[i].Value
	}
	n := len(domain) + 4
	for i, e := range entries {
		n += len(e.Key) + len(value(i)) + 8
	}
	var b strings.Builder
	b.Grow(n)
	var digits [20]byte
	put := func(s string) {
		b.Write(strconv.AppendUint(digits[:0], uint64(len(s)), 10))
		b.WriteByte(':')
		b.WriteString(s)
	}
	put(domain)
	for i, e := range entries {
		put(e.Key)
		put(value(i))
	}
	return b.String()
}
