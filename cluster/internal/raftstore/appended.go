package raftstore

import (
	"sync"
	"sync/atomic"

	"github.com/hashicorp/raft"
)

// AppendedSignals tells the leader's group commit when one of its entries
// is in the leader's own log. hashicorp/raft appends an entry to the
// leader's log before it replicates it, and appends what reached it
// meanwhile together: so the next entry need not wait for the previous
// one's commit, only for its append; while the previous entry replicates
// (a follower's fsync), the next is appended (the leader's), and the two
// fsyncs of consecutive entries overlap. An entry is known by its data:
// raft stores the very slice given to Apply.
type AppendedSignals struct {
	waiting atomic.Int64 // len(byData), read without the lock by every append
	mu      sync.Mutex
	byData  map[*byte]chan struct{}
}

// Expect returns a channel closed once data is appended to the log, and a
// function that forgets it (call it when the entry's outcome is known,
// whether or not it was appended). data must not be empty.
func (s *AppendedSignals) Expect(data []byte) (appended <-chan struct{}, forget func()) {
	ch := make(chan struct{})
	key := &data[0]
	s.mu.Lock()
	if s.byData == nil {
		s.byData = make(map[*byte]chan struct{})
	}
	s.byData[key] = ch
	s.waiting.Store(int64(len(s.byData)))
	s.mu.Unlock()
	return ch, func() {
		s.mu.Lock()
		if c, ok := s.byData[key]; ok && c == ch {
			delete(s.byData, key)
			s.waiting.Store(int64(len(s.byData)))
		}
		s.mu.Unlock()
	}
}

// Appended signals the entries of logs that someone expects; the log
// store calls it after each successful append.
func (s *AppendedSignals) Appended(logs []*raft.Log) {
	if s.waiting.Load() == 0 {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, l := range logs {
		if len(l.Data) == 0 {
			continue
		}
		if ch, ok := s.byData[&l.Data[0]]; ok {
			close(ch)
			delete(s.byData, &l.Data[0])
		}
	}
	s.waiting.Store(int64(len(s.byData)))
}
