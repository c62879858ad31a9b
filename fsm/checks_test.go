package fsm

import (
	"github.com/limitnode/limitnode/algorithms"
	"github.com/limitnode/limitnode/contract"
)

// inlineCheck is the log's form of a check of cost against l on key.
func inlineCheck(key string, l algorithms.Limit, cost int64) Check {
	return CheckOf(contract.Check{Key: key, Limit: l, Cost: cost, Peek: cost == 0})
}

// policyCheck is the log's form of a check of cost against a named policy,
// on key or on the key its template makes of dims.
func policyCheck(key, policy string, dims []contract.Dimension, cost int64) Check {
	return CheckOf(contract.Check{Key: key, Policy: policy, Dimensions: dims, Cost: cost, Peek: cost == 0})
}
