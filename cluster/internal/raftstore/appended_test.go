package raftstore

import (
	"testing"

	"github.com/hashicorp/raft"
)

func TestAppendedSignalsNameTheEntriesAppended(t *testing.T) {
	t.Parallel()
	var s AppendedSignals
	mine, other := []byte("entry"), []byte("entry")
	appended, forget := s.Expect(mine)
	s.Appended([]*raft.Log{{Data: other}, {Data: nil}})
	select {
	case <-appended:
		t.Fatal("signalled for another entry with equal bytes")
	default:
	}
	s.Appended([]*raft.Log{{Data: other}, {Data: mine}})
	select {
	case <-appended:
	default:
		t.Fatal("not signalled once the entry was appended")
	}
	forget()
	_, forget = s.Expect(other)
	forget()
	if s.waiting.Load() != 0 || len(s.byData) != 0 {
		t.Fatalf("%d signals left after forgetting every one", len(s.byData))
	}
}
