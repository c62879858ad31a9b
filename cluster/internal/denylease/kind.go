package denylease

import (
	"strconv"
	"strings"

	"github.com/limitnode/limitnode/fsm"
)

// Leasable reports whether a request may be answered from a lease, or may
// take one: one without a request ID (its answer would be the FSM's
// memory) and not waiting by reservation.
func Leasable(r *fsm.Request) bool { return r.RequestID == "" && r.MaxWait == 0 }

// KindOf names the kind of request a lease answers: what it counts on
// (fsm.Request.CountsOn) and what each check or descriptor costs, so that a lease
// answers only the request it was taken for.
func KindOf(r *fsm.Request) string {
	var b strings.Builder
	b.WriteString(r.CountsOn())
	b.WriteString("\x02")
	if r.RLS != nil {
		for _, d := range r.RLS.Descriptors {
			b.WriteString(strconv.FormatInt(d.Hits, 10) + ",")
		}
	}
	for _, c := range r.Checks {
		b.WriteString(strconv.FormatInt(c.Cost, 10) + ",")
	}
	return b.String()
}
