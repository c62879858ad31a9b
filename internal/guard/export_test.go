package guard

// busy counts the open connections with a request under way.
func (l *Listener) busy() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := 0
	for _, c := range l.byRemote {
		if c.serving.Load() || c.requests.Load() > 0 {
			n++
		}
	}
	return n
}
