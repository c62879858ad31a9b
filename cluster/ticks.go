package cluster

import "time"

// onEachTick calls fn every interval until the node stops. It is the loop
// of the node's background watchers.
func (n *Node) onEachTick(every time.Duration, fn func()) {
	ticker := time.NewTicker(every)
	defer ticker.Stop()
	for {
		select {
		case <-n.stopCh:
			return
		case <-ticker.C:
		}
		fn()
	}
}
