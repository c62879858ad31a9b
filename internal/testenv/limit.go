package testenv

import (
	"cmp"
	"fmt"
	"slices"

	"github.com/limitnode/limitnode/algorithms"
)

// Admission is units a test saw admitted at a cluster time (Unix ns).
type Admission struct{ At, Units int64 }

// OverTheLimit returns how admissions break l over some interval, or "":
// more than a bucket's burst plus what refills over the interval
// (burst + rate × (b − a) over [a, b]), more than a fixed window's rate in
// one window, or more than the log's or the counter's rate within a
// period. It sorts admissions by time.
func OverTheLimit(l algorithms.Limit, admissions []Admission) string {
	slices.SortStableFunc(admissions, func(a, b Admission) int { return cmp.Compare(a.At, b.At) })
	period := int64(l.Period)
	for i := range admissions {
		var sum int64
		for j := i; j < len(admissions); j++ {
			span := admissions[j].At - admissions[i].At
			if !l.Algorithm.IsBucket() && span >= period ||
				l.Algorithm == algorithms.FixedWindow && admissions[j].At/period != admissions[i].At/period {
				break
			}
			sum += admissions[j].Units
			bound := l.Rate
			if l.Algorithm.IsBucket() {
				bound = l.Burst + span*l.Rate/period
			}
			if sum > bound {
				return fmt.Sprintf("%v: %d admitted from %d to %d, over %d", l, sum, admissions[i].At, admissions[j].At, bound)
			}
		}
	}
	return ""
}
