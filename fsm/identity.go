package fsm

import "github.com/limitnode/limitnode/contract"

// The cluster's ID is part of the replicated state so that every member
// learns it from the log, as it learns everything else: the first leader of
// a cluster appends it (CommandSetClusterID), and the first one applied
// stays. Package cluster keeps a copy in each node's stable store, so that a
// node knows which cluster its data directory belongs to before Raft
// replays anything. A backup does not carry it in its state (see
// withoutMembers): a restored cluster keeps its own.

// ClusterIDCommand is the body of CommandSetClusterID.
type ClusterIDCommand struct {
	ID string
}

// ClusterID returns the cluster's ID as applied, or "" before it is.
func (f *FSM) ClusterID() string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.clusterID
}

// OnClusterID registers fn to be called, on the applying goroutine, with the
// cluster's ID whenever the state comes to hold one: the entry that sets it,
// or a snapshot restored with it. fn must not block or call into the FSM.
// Set it before the FSM is given to Raft.
func (f *FSM) OnClusterID(fn func(id string)) { f.onClusterID = fn }

// applyClusterID records the cluster's ID unless the state holds one.
func (f *FSM) applyClusterID(body []byte) (any, error) {
	var cmd ClusterIDCommand
	if err := decodeBody(body, &cmd); err != nil {
		return nil, err
	}
	if err := contract.ValidateClusterID(cmd.ID); err != nil {
		return err, nil
	}
	if f.clusterID != "" {
		return nil, nil
	}
	f.clusterID = cmd.ID
	f.announceClusterID()
	return nil, nil
}

func (f *FSM) announceClusterID() {
	if f.onClusterID != nil && f.clusterID != "" {
		f.onClusterID(f.clusterID)
	}
}
