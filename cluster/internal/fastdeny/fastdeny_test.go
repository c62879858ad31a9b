package fastdeny

import (
	"testing"

	"github.com/limitnode/limitnode/algorithms"
	"github.com/limitnode/limitnode/contract"
	"github.com/limitnode/limitnode/fsm"
)

func TestRecentNotesDenialsAndLastUnitsOnly(t *testing.T) {
	t.Parallel()
	req := func(key string) fsm.Request { return fsm.Request{Checks: []fsm.Check{{Key: key, Rate: 1}}} }
	admitted := func(remaining int64) fsm.Result {
		return fsm.Result{Allowed: true, Checks: []fsm.CheckResult{{Decision: algorithms.Decision{Allowed: true, Remaining: remaining}}}}
	}
	tests := []struct {
		name   string
		result fsm.Result
		noted  bool
	}{
		{"a denial", fsm.Result{Checks: []fsm.CheckResult{{}}}, true},
		{"an admission that took the last unit", admitted(0), true},
		{"an admission with units left", admitted(3), false},
		{"a request refused as it stands", fsm.Result{Rejection: &contract.Error{}}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			var r Recent
			r.Note([]fsm.Request{req("k")}, []fsm.Result{tt.result})
			if got := r.AnyRecent([]fsm.Request{req("k")}); got != tt.noted {
				t.Fatalf("AnyRecent = %v, want %v", got, tt.noted)
			}
			if r.AnyRecent([]fsm.Request{req("other")}) {
				t.Fatal("another key counts as recent")
			}
		})
	}
}

func TestQueuedCountsRequestsOnTheirWay(t *testing.T) {
	t.Parallel()
	var q Queued
	a, b := fsm.Request{Checks: []fsm.Check{{Key: "a", Rate: 1}}}, fsm.Request{Checks: []fsm.Check{{Key: "b", Rate: 1}}}
	q.Add([]fsm.Request{a, a}, 1)
	if !q.Has(&a) || q.Has(&b) {
		t.Fatalf("after two of a: Has(a)=%v Has(b)=%v", q.Has(&a), q.Has(&b))
	}
	q.Add([]fsm.Request{a}, -1)
	if !q.Has(&a) {
		t.Fatal("one of a is still on its way")
	}
	q.Add([]fsm.Request{a}, -1)
	if q.Has(&a) || len(q.n) != 0 {
		t.Fatalf("none left, yet Has(a)=%v with %d keys counted", q.Has(&a), len(q.n))
	}
}
