package contract

import "github.com/limitnode/limitnode/algorithms"

// Pages of the key listing (GET /v1/keys): DefaultKeyPage keys unless the
// caller asks for fewer or more, at most MaxKeyPage.
const (
	DefaultKeyPage = 100
	MaxKeyPage     = 1000
)

// KeyState is what the cluster holds of one key: its state under each limit
// that has any, as of one cluster time, consuming nothing.
type KeyState struct {
	Key    string
	Limits []KeyLimit
}

// KeyLimit is a key's state under one limit.
type KeyLimit struct {
	// Owner is the policy whose limit it is, "rls/" and a domain for an
	// Envoy rate limit service counter, or "" for an inline limit.
	Owner string
	// Limit is the limit the state is under.
	Limit algorithms.Limit
	// Decision is what a request of cost 0 would be told now: what
	// remains and when the limit is fully available again.
	Decision algorithms.Decision
}

// ValidateKeyPage checks a key listing's page size.
func ValidateKeyPage(limit int) *Error {
	if limit < 1 || limit > MaxKeyPage {
		return Invalid("limit", "limit must be an integer from 1 to %d", MaxKeyPage)
	}
	return nil
}
