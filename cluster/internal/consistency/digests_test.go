package consistency

import (
	"context"
	"testing"
	"time"
)

// TestDigestsCompareOnlyAtTheSameIndex: a digest agrees or differs only
// against this node's at the same index; one it has no digest for (or the
// zero checkpoint) cannot be compared.
func TestDigestsCompareOnlyAtTheSameIndex(t *testing.T) {
	var d Digests
	d.add(Checkpoint{Index: 10, Sum: [32]byte{1}})
	tests := []struct {
		name               string
		theirs             Checkpoint
		agrees, comparable bool
	}{
		{"the same digest agrees", Checkpoint{Index: 10, Sum: [32]byte{1}}, true, true},
		{"another digest differs", Checkpoint{Index: 10, Sum: [32]byte{2}}, false, true},
		{"an index this node has no digest for cannot be compared", Checkpoint{Index: 11, Sum: [32]byte{1}}, false, false},
		{"no checkpoint cannot be compared", Checkpoint{}, false, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			agrees, comparable := d.Compare(tt.theirs)
			if agrees != tt.agrees || comparable != tt.comparable {
				t.Fatalf("Compare = (%v, %v), want (%v, %v)", agrees, comparable, tt.agrees, tt.comparable)
			}
		})
	}
}

// TestDigestsKeepTheLatestFew: only keptCheckpoints digests are kept, the
// newest last.
func TestDigestsKeepTheLatestFew(t *testing.T) {
	var d Digests
	for i := uint64(1); i <= keptCheckpoints+3; i++ {
		d.add(Checkpoint{Index: i})
	}
	if got := d.Latest().Index; got != keptCheckpoints+3 {
		t.Fatalf("Latest().Index = %d", got)
	}
	if _, ok := d.at(3); ok {
		t.Fatal("the digest at index 3 is still kept")
	}
	if _, ok := d.at(4); !ok {
		t.Fatal("the digest at index 4 is not kept")
	}
}

// TestAMemberThatNeverTakesTheDigestIsNotCounted: awaitAgreement gives up
// when ctx ends, with ok false, and answers as soon as the member has it.
func TestAMemberThatNeverTakesTheDigestIsNotCounted(t *testing.T) {
	var d Digests
	d.add(Checkpoint{Index: 7, Sum: [32]byte{9}})
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	if _, ok := d.awaitAgreement(ctx, func() Checkpoint { return Checkpoint{Index: 6} }, 7); ok {
		t.Fatal("a member behind the checkpoint was counted")
	}
	agrees, ok := d.awaitAgreement(context.Background(), func() Checkpoint { return Checkpoint{Index: 7, Sum: [32]byte{9}} }, 7)
	if !ok || !agrees {
		t.Fatalf("a member with the same digest: (%v, %v), want (true, true)", agrees, ok)
	}
}
