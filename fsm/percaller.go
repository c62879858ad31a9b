package fsm

// perCaller counts what each caller (a request's scope: an API token's
// name) holds of one table that every caller fills, so that a bound per
// caller keeps one from shutting the others out: request IDs, open
// reservations, penalty counts. Without tokens every caller is the one
// unnamed scope, bound by the table's own bound alone.
type perCaller map[string]int

func (p perCaller) add(scope string) { p[scope]++ }

func (p perCaller) remove(scope string) {
	if p[scope] <= 1 {
		delete(p, scope)
	} else {
		p[scope]--
	}
}

// full reports whether scope, a named caller, holds bound or more; a
// bound of 0 or less is none.
func (p perCaller) full(scope string, bound int64) bool {
	return scope != "" && bound > 0 && int64(p[scope]) >= bound
}
