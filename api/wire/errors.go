package wire

// Error is the body of every error answer: what is wrong for a person, a
// machine code (invalid_argument, not_found, conflict, unavailable, ...)
// and the JSON path of the field at fault, when one is.
type Error struct {
	Message string `json:"error"`
	Code    string `json:"code"`
	Field   string `json:"field,omitempty"`
}
