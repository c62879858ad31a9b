package groupcommit

import (
	"fmt"

	"github.com/limitnode/limitnode/fsm"
)

// Requests is the requests of calls, in order: what one flush sends.
func Requests(calls []*Call) []fsm.Request {
	if len(calls) == 1 {
		return calls[0].Requests
	}
	size := 0
	for _, c := range calls {
		size += len(c.Requests)
	}
	reqs := make([]fsm.Request, 0, size)
	for _, c := range calls {
		reqs = append(reqs, c.Requests...)
	}
	return reqs
}

// Distribute answers calls with results, one per request of Requests(calls)
// in the same order, decided by leader; a count that differs fails them all.
func Distribute(calls []*Call, results []fsm.Result, leader string) {
	if want := len(Requests(calls)); len(results) != want {
		FailAll(calls, fmt.Errorf("groupcommit: %d results for %d requests", len(results), want))
		return
	}
	for _, c := range calls {
		c.Results, results = results[:len(c.Requests):len(c.Requests)], results[len(c.Requests):]
		c.Leader = leader
	}
}

// FailAll answers every call with err.
func FailAll(calls []*Call, err error) {
	for _, c := range calls {
		c.Err = err
	}
}
