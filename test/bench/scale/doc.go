// Package scale is the many-experiments benchmark of issue 16 item 7 and
// DESIGN.md §7: one manager process carrying N experiments that are running at
// once (sampling, windows opening and closing, http toggles applied and
// reverted, k6 Jobs completing), against a real kube-apiserver and etcd.
//
// The test plays the rest of the cluster: the Deployment controller (targets
// roll out at once), the Job controller and kubelet (a k6 Job's pod starts at
// once and ends with a valid k6 summary in its termination message when its
// window has elapsed, on the real clock), the garbage collector (a deleted
// Job's pods are deleted within a second), the target pods' admin endpoints
// (one small HTTP server per loopback address 127.x.y.z; the first target's
// never answers), and Prometheus (an in-process server answering the query
// API, whose working set for one target jumps above the memory guardrail at a
// known instant).
//
// It is skipped unless asked for, so `go test ./...` only compiles it:
//
//	go test ./test/bench/scale -scale            # sanity: N=5, about 3.5 minutes
//	go test ./test/bench/scale -scale -scale.n=100 -timeout 30m -v
//	make bench-scale                              # N=100; N=1000: make bench-scale N=1000
//
// PERF_BENCH_SCALE=<N> does the same as -scale -scale.n=<N> (1 is the sanity
// run). See scale_test.go for what the table's columns measure.
package scale
