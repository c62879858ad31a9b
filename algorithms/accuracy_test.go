package algorithms

import (
	"flag"
	"math"
	"math/rand/v2"
	"testing"
	"time"
)

var longAccuracy = flag.Bool("accuracy.long", false, "run the sliding-window accuracy study on a long trace (minutes)")

// traceClient describes how one synthetic client sends requests.
type traceClient struct {
	kind   string  // "poisson", "onoff" or "heavy"
	rate   float64 // mean requests per second while sending
	onFor  float64 // mean seconds on (on/off clients)
	offFor float64 // mean seconds off
}

// arrivals returns the client's request times (ns since 0) over duration.
func (c traceClient) arrivals(rng *rand.Rand, duration time.Duration) []int64 {
	var out []int64
	t := 0.0
	end := duration.Seconds()
	on := true
	switchAt := math.Inf(1)
	if c.kind == "onoff" {
		on = rng.IntN(2) == 0
		switchAt = rng.ExpFloat64() * c.onFor
	}
	for t < end {
		if t >= switchAt {
			on = !on
			mean := c.offFor
			if on {
				mean = c.onFor
			}
			switchAt = t + rng.ExpFloat64()*mean
		}
		if !on {
			t = switchAt
			continue
		}
		t += rng.ExpFloat64() / c.rate
		if t < end && t < switchAt {
			out = append(out, int64(t*1e9))
		}
	}
	return out
}

// kindReport is what the study measures for one kind of client.
type kindReport struct {
	clients, decisions int
	disagreements      int
	counterOnlyAllowed int // the counter admitted what the exact log denied
	logOnlyAllowed     int // the log admitted what the counter denied
	// wrongAllows and wrongDenies judge each of the counter's decisions by
	// the exact rule applied to the counter's own history: admitted while
	// its last period already held rate, or denied while it held less.
	wrongAllows, wrongDenies int
	worstOverAdmission       int64
}

var traceKinds = []string{"quiet", "near", "onoff", "heavy"}

// drawClient draws a client of the trace's mix: most stay well under the
// limit, as most real clients do; some hover around it; some burst far over
// it and go quiet; a few hammer it.
func drawClient(rng *rand.Rand, perSecond float64) traceClient {
	switch r := rng.Float64(); {
	case r < 0.70:
		return traceClient{kind: "quiet", rate: perSecond * (0.05 + 0.65*rng.Float64())}
	case r < 0.85:
		return traceClient{kind: "near", rate: perSecond * (0.7 + 0.8*rng.Float64())}
	case r < 0.98:
		return traceClient{kind: "onoff", rate: perSecond * (2 + 6*rng.Float64()), onFor: 5 + 25*rng.Float64(), offFor: 10 + 80*rng.Float64()}
	default:
		return traceClient{kind: "heavy", rate: perSecond * (5 + 10*rng.Float64())}
	}
}

// runAccuracyStudy replays a synthetic trace through the sliding window
// counter and the exact sliding window log, each keeping its own state per
// client as it would in production, and compares their decisions request by
// request. It also measures, for the counter, the most it admitted in any
// sliding window of one period beyond the limit.
func runAccuracyStudy(seed uint64, clients int, duration time.Duration) map[string]*kindReport {
	rng := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	const rate = 100
	period := int64(time.Minute)
	counterLimit := Limit{Algorithm: SlidingWindowCounter, Rate: rate, Period: time.Duration(period)}
	logLimit := Limit{Algorithm: SlidingWindowLog, Rate: rate, Period: time.Duration(period)}
	start := int64(30_000_000)*int64(time.Minute) + rng.Int64N(period) // not aligned to a window

	reports := map[string]*kindReport{}
	for _, k := range traceKinds {
		reports[k] = &kindReport{}
	}
	for range clients {
		c := drawClient(rng, float64(rate)/60)
		rep := reports[c.kind]
		rep.clients++
		var counterState, logState State
		var admitted []int64
		inWindow := 0 // admitted[inWindow:] are within the last period
		for _, at := range c.arrivals(rng, duration) {
			now := start + at
			for inWindow < len(admitted) && admitted[inWindow] <= now-period {
				inWindow++
			}
			exactAllows := len(admitted)-inWindow+1 <= rate
			dc, nextCounter := Decide(counterLimit, counterState, now, 1)
			switch {
			case dc.Allowed && !exactAllows:
				rep.wrongAllows++
			case !dc.Allowed && exactAllows:
				rep.wrongDenies++
			}
			dl, nextLog := Decide(logLimit, logState, now, 1)
			counterState, logState = nextCounter, nextLog
			rep.decisions++
			if dc.Allowed != dl.Allowed {
				rep.disagreements++
				if dc.Allowed {
					rep.counterOnlyAllowed++
				} else {
					rep.logOnlyAllowed++
				}
			}
			if dc.Allowed {
				admitted = append(admitted, now)
			}
		}
		// Most admitted by the counter in any window (t − period, t].
		lo := 0
		for hi, t := range admitted {
			for admitted[lo] <= t-period {
				lo++
			}
			rep.worstOverAdmission = max(rep.worstOverAdmission, int64(hi-lo+1)-rate)
		}
	}
	return reports
}

// TestSlidingWindowAccuracyStudy measures how often the sliding window
// counter decides differently from the exact log, and how far over the limit
// it goes, per kind of client. The short trace runs in every test run; the
// long one with -accuracy.long. The figures are in docs/algorithms.md.
func TestSlidingWindowAccuracyStudy(t *testing.T) {
	t.Parallel()
	clients, duration := 400, 10*time.Minute
	if *longAccuracy {
		clients, duration = 5000, time.Hour
	}
	reports := runAccuracyStudy(1, clients, duration)
	var total kindReport
	for _, k := range traceKinds {
		r := reports[k]
		t.Logf("%-6s %5d clients %8d decisions: wrong by the exact rule %.4f%% (%d allows, %d denies); differs from the log run beside it %.2f%%; worst over-admission in a sliding minute %d (limit 100)",
			k, r.clients, r.decisions, 100*float64(r.wrongAllows+r.wrongDenies)/float64(max(r.decisions, 1)), r.wrongAllows, r.wrongDenies,
			100*float64(r.disagreements)/float64(max(r.decisions, 1)), r.worstOverAdmission)
		total.decisions += r.decisions
		total.disagreements += r.disagreements
		total.wrongAllows += r.wrongAllows
		total.wrongDenies += r.wrongDenies
		total.worstOverAdmission = max(total.worstOverAdmission, r.worstOverAdmission)
	}
	t.Logf("all    %d decisions over %s: wrong by the exact rule %.4f%% (%d allows, %d denies); differs from the log %.2f%%",
		total.decisions, duration, 100*float64(total.wrongAllows+total.wrongDenies)/float64(total.decisions), total.wrongAllows, total.wrongDenies,
		100*float64(total.disagreements)/float64(total.decisions))
	if total.decisions < 100_000 {
		t.Fatalf("the trace made only %d decisions", total.decisions)
	}
	// The counter's estimate is exact when the previous window's requests
	// were spread evenly, and can never hold the window above twice the
	// limit: previous ≤ rate and current ≤ rate.
	if total.worstOverAdmission >= 100 {
		t.Fatalf("the counter admitted %d over the limit in one sliding window", total.worstOverAdmission)
	}
	// Clients that stay well under the limit are never limited by either.
	if q := reports["quiet"]; float64(q.disagreements+q.wrongAllows+q.wrongDenies) > 0.001*float64(q.decisions) {
		t.Fatalf("quiet clients: %d disagreements and %d wrong decisions in %d", q.disagreements, q.wrongAllows+q.wrongDenies, q.decisions)
	}
}
