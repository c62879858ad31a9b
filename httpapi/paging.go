package httpapi

import (
	"net/url"
	"strconv"

	"github.com/limitnode/limitnode/contract"
)

// pageLimit reads a listing's "limit" query parameter: def when it is not
// given, else the integer validate accepts (a value that is not an integer
// is refused by validate as out of range).
func pageLimit(q url.Values, def int, validate func(int) *contract.Error) (int, *apiError) {
	s := q.Get("limit")
	if s == "" {
		return def, nil
	}
	n, err := strconv.Atoi(s)
	if err != nil {
		n = -1
	}
	if err := validate(n); err != nil {
		return 0, fromContract(err)
	}
	return n, nil
}
