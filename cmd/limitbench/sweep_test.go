package main

import (
	"reflect"
	"testing"
)

func TestEnvoySafeRates(t *testing.T) {
	t.Parallel()
	open := func(target string, rate, p99 float64) result {
		return result{Target: target, Callers: 256, Mode: "open", Rate: rate, P99MS: p99, Calls: 1000}
	}
	missed := func(r result, errors, unsent int64) result { r.Errors, r.Unsent = errors, unsent; return r }
	results := []result{
		{Target: "grpc", Callers: 64, DecisionsPerSec: 5000, P99MS: 90}, // closed loop: not in the sweep
		open("grpc", 1000, 25), open("grpc", 500, 12), open("grpc", 2000, 15), // 2000 is under 20 ms, but 1000 was not
		open("erl", 500, 3), open("erl", 1000, 7), open("erl", 2000, 19.9),
		open("grpc-flood", 500, 30),
		open("erl-flood-cache", 500, 2), missed(open("erl-flood-cache", 1000, 2), 11, 0),
		open("http", 1000, 5), missed(open("http", 2000, 5), 5, 5),
	}
	got := envoySafeRates(results)
	want := []envoySafe{
		{Target: "grpc", Callers: 256, Rate: 500, Rates: []float64{500, 1000, 2000}, VsERL: 0.25},
		{Target: "erl", Callers: 256, Rate: 2000, EveryRate: true, Rates: []float64{500, 1000, 2000}, VsERL: 1},
		{Target: "grpc-flood", Callers: 256, Rate: 0, Rates: []float64{500}, VsERLCache: 0},
		{Target: "erl-flood-cache", Callers: 256, Rate: 500, Rates: []float64{500, 1000}, VsERLCache: 1},
		{Target: "http", Callers: 256, Rate: 2000, EveryRate: true, Rates: []float64{1000, 2000}, VsERL: 1},
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("got  %+v\nwant %+v", got, want)
	}
}
