package consistency

import "sync"

// Checkpoint is a replica's digest of its state at a log index.
type Checkpoint struct {
	Index uint64
	Sum   [32]byte
}

// Digests holds the digests a node has computed, newest last.
type Digests struct {
	mu     sync.Mutex
	recent []Checkpoint
}

// keptCheckpoints is how many digests a node keeps for comparison.
const keptCheckpoints = 8

// OnCheckpoint is the state machine's hook (fsm.FSM.OnCheckpoint): the
// digest is computed off the applying goroutine, from the state frozen at
// the checkpoint's index.
func (d *Digests) OnCheckpoint(index uint64, digest func() [32]byte) {
	go func() { d.add(Checkpoint{Index: index, Sum: digest()}) }()
}

func (d *Digests) add(cp Checkpoint) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.recent = append(d.recent, cp)
	if len(d.recent) > keptCheckpoints {
		d.recent = d.recent[len(d.recent)-keptCheckpoints:]
	}
}

// at returns the digest at index, if this node has it.
func (d *Digests) at(index uint64) ([32]byte, bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	for _, cp := range d.recent {
		if cp.Index == index {
			return cp.Sum, true
		}
	}
	return [32]byte{}, false
}

// Latest returns the newest digest, or the zero checkpoint.
func (d *Digests) Latest() Checkpoint {
	d.mu.Lock()
	defer d.mu.Unlock()
	if len(d.recent) == 0 {
		return Checkpoint{}
	}
	return d.recent[len(d.recent)-1]
}

// Compare compares another replica's digest with this node's at the same
// index: comparable is false when there is nothing to compare (theirs is
// the zero checkpoint, or this node has no digest at its index).
func (d *Digests) Compare(theirs Checkpoint) (agrees, comparable bool) {
	if theirs.Index == 0 {
		return false, false
	}
	mine, ok := d.at(theirs.Index)
	if !ok {
		return false, false
	}
	return mine == theirs.Sum, true
}
