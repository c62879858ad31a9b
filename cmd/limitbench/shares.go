package main

import (
	"math/rand/v2"
	"strconv"
	"sync"
	"time"

	"github.com/limitnode/limitnode/algorithms"
	"github.com/limitnode/limitnode/contract"
)

// The shares targets measure local shares (the policy option
// local_shares): http-shares and embedded-shares are http and embedded
// with local_shares on their limit (run them with -keys hot for a hot key);
// zipf and zipf-shares send POST /v1/allow over a Zipf-distributed key set
// (s = 1.1 over 100,000 keys) with a limit tight enough for the hottest
// keys to be denied (a 429 counts as a decision).

// benchSharedLimitJSON is benchLimitJSON with local shares.
const benchSharedLimitJSON = `{"rate":1000000000,"period":"1s","burst":1000000000,"local_shares":{}}`

// benchShares are the local shares of the embedded-shares target.
var benchShares = &contract.LocalShares{}

const (
	zipfKeys = 100_000
	zipfS    = 1.1
	// zipfLimitJSON holds each key to 200 a second: at tens of thousands
	// of requests a second the few hottest keys ask more, and are denied.
	zipfLimitJSON       = `{"rate":200,"period":"1s"}`
	zipfSharedLimitJSON = `{"rate":200,"period":"1s","local_shares":{}}`
)

// zipfLimit is zipfLimitJSON for the embedded API.
var zipfLimit = algorithms.Limit{Rate: 200, Period: time.Second, Burst: 200}

// zipfKeySet draws keys, one generator per caller (a generator is not safe
// for concurrent use).
type zipfKeySet struct {
	mu   sync.Mutex
	gens map[int]*rand.Zipf
}

func (z *zipfKeySet) key(caller int) string {
	z.mu.Lock()
	g := z.gens[caller]
	if g == nil {
		if z.gens == nil {
			z.gens = map[int]*rand.Zipf{}
		}
		g = rand.NewZipf(rand.New(rand.NewPCG(uint64(caller), 7)), zipfS, 1, zipfKeys-1)
		z.gens[caller] = g
	}
	n := g.Uint64()
	z.mu.Unlock()
	return "z-" + strconv.FormatUint(n, 10)
}
