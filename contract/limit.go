package contract

import (
	"errors"
	"strings"
	"time"

	"github.com/limitnode/limitnode/algorithms"
)

// DefaultPeriod is a limit's period when none is given.
const DefaultPeriod = time.Second

// LimitSpec is a limit as callers spell it: an algorithm's name, a rate per
// period given as a Go duration, and for the bucket algorithms a burst. A nil
// field was not given.
type LimitSpec struct {
	Algorithm string
	Rate      *int64
	Period    *string
	Burst     *int64
}

// algorithmList names every algorithm, for messages.
var algorithmList = func() string {
	var names []string
	for a := algorithms.TokenBucket; a <= algorithms.SlidingWindowCounter; a++ {
		names = append(names, a.String())
	}
	return strings.Join(names, ", ")
}()

// Limit turns the spec into a limit, applying the defaults (token_bucket,
// a period of DefaultPeriod, burst = rate for the bucket algorithms), and
// validates it. Fields are named relative to the limit ("rate", "period").
func (s LimitSpec) Limit() (algorithms.Limit, *Error) {
	alg, err := algorithms.ParseAlgorithm(s.Algorithm)
	if err != nil {
		return algorithms.Limit{}, Invalid("algorithm", "unknown algorithm %q; one of %s", s.Algorithm, algorithmList)
	}
	if s.Rate == nil {
		return algorithms.Limit{}, Invalid("rate", "rate is required")
	}
	period := DefaultPeriod
	if s.Period != nil {
		if period, err = time.ParseDuration(*s.Period); err != nil {
			return algorithms.Limit{}, Invalid("period", "period %q is not a Go duration such as \"500ms\", \"1m\" or \"24h\"", *s.Period)
		}
	}
	l := algorithms.Limit{Algorithm: alg, Rate: *s.Rate, Period: period}
	switch {
	case s.Burst != nil && !alg.IsBucket():
		return algorithms.Limit{}, Invalid("burst", "burst applies to token_bucket, leaky_bucket and gcra; %s admits up to rate per period", alg)
	case s.Burst != nil:
		l.Burst = *s.Burst
	case alg.IsBucket():
		l.Burst = l.Rate
	}
	if err := ValidateLimit(l); err != nil {
		return algorithms.Limit{}, err
	}
	return l, nil
}

// SpecOf is the spec that gives back l, with every field spelled out.
func SpecOf(l algorithms.Limit) LimitSpec {
	period := l.Period.String()
	s := LimitSpec{Algorithm: l.Algorithm.String(), Rate: &l.Rate, Period: &period}
	if l.Algorithm.IsBucket() {
		s.Burst = &l.Burst
	}
	return s
}

// limitFields names the field each of package algorithms' errors is about.
var limitFields = []struct {
	err   error
	field string
}{
	{algorithms.ErrUnknownAlgorithm, "algorithm"},
	{algorithms.ErrRate, "rate"},
	{algorithms.ErrLogRate, "rate"},
	{algorithms.ErrPeriod, "period"},
	{algorithms.ErrBurst, "burst"},
	{algorithms.ErrBurstWithWindow, "burst"},
	{algorithms.ErrFillTime, "burst"},
	{algorithms.ErrCost, "cost"},
}

// limitError names the field of an error of package algorithms.
func limitError(err error) *Error {
	for _, f := range limitFields {
		if errors.Is(err, f.err) {
			return Invalid(f.field, "%v", err)
		}
	}
	return Invalid("", "%v", err)
}

// ValidateLimit checks that a limit can be decided without overflow. Fields
// are named relative to the limit ("rate", "burst").
func ValidateLimit(l algorithms.Limit) *Error {
	if err := l.Validate(); err != nil {
		return limitError(err)
	}
	return nil
}

// ValidateCost checks that cost can ever be admitted under l: from 0 to the
// limit's capacity. The field is "cost".
func ValidateCost(l algorithms.Limit, cost int64) *Error {
	if err := l.ValidateCost(cost); err != nil {
		return Invalid("cost", "cost must be an integer from 0 to %d (the most this limit can ever admit at once)", l.Capacity())
	}
	return nil
}
