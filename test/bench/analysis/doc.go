// Package analysisbench measures internal/analysis against the design's bars on
// simulated, seeded data: the 95 % interval of an injected CPU (+4 %) and memory
// (+2 %) overhead must cover the truth in ≥ 95 % of trials, and A/A runs must be
// flagged significant in ≤ 5 %. Run it with
//
//	go test ./test/bench/analysis/ -v -run .
//
// for the table, and -bench . for the cost of one comparison.
package analysisbench
