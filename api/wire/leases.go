package wire

// LeaseRequest is the body of POST /v1/leases: one of Max concurrent slots
// of Key for TTL (Go durations), waiting up to MaxWait in a queue of at most
// MaxQueue when every slot is held.
type LeaseRequest struct {
	Key      string  `json:"key"`
	Max      *int64  `json:"max"`
	TTL      *string `json:"ttl"`
	MaxWait  *string `json:"max_wait,omitempty"`
	MaxQueue int64   `json:"max_queue,omitempty"`
}

// Lease is the answer of an acquire (200 or 429) or a renewal.
type Lease struct {
	Granted      bool   `json:"granted"`
	ID           string `json:"id,omitempty"`
	Key          string `json:"key"`
	Max          int64  `json:"max"`
	Active       int64  `json:"active"`
	ExpiresInMS  int64  `json:"expires_in_ms,omitempty"`
	RetryAfterMS int64  `json:"retry_after_ms"`
	Waiting      int64  `json:"waiting"`
	WaitedMS     int64  `json:"waited_ms,omitempty"`
}

// RenewRequest is the body of POST /v1/leases/{id}/renew.
type RenewRequest struct {
	TTL *string `json:"ttl"`
}

// HeldLease is one held lease in GET /v1/leases.
type HeldLease struct {
	ID          string `json:"id"`
	Max         int64  `json:"max"`
	ExpiresInMS int64  `json:"expires_in_ms"`
}

// QueuedLease is one waiting request in GET /v1/leases.
type QueuedLease struct {
	ID         string `json:"id"`
	Max        int64  `json:"max"`
	Position   int64  `json:"position"`
	LeavesInMS int64  `json:"leaves_in_ms"`
}

// LeaseList is the body of GET /v1/leases?key=K.
type LeaseList struct {
	Key     string        `json:"key"`
	Leases  []HeldLease   `json:"leases"`
	Waiting []QueuedLease `json:"waiting"`
}
