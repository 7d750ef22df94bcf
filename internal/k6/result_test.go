package k6

import (
	"math/rand/v2"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	perfv1 "perfexp.dev/perf-operator/api/v1alpha1"
)

// goodSummary is a termination message as run.js writes it.
const goodSummary = `{"v":1,"window":"profiling-overhead-s1-baseline","index":1,"pods":2,"qps":301,"rate":150,` +
	`"startMs":1795394937973,"durationMs":5017.103,"requests":750,"iterations":750,"failures":3,"dropped":0,` +
	`"p50":2.52,"p95":6.079,"p99":6.46,"max":10.304,"hist":{"minMs":0.05,"growth":1.02,"width":1,"b":[190,700,10,50]}}`

func TestParseResult(t *testing.T) {
	got, err := ParseResult(goodSummary + "\n")
	if err != nil {
		t.Fatal(err)
	}
	want := &PodResult{
		Requests: 750, Failures: 3, DroppedIterations: 0, Iterations: 750,
		P50Ms: 2.52, P95Ms: 6.079, P99Ms: 6.46, MaxMs: 10.304, DurationSeconds: 5.017103,
		Histogram: Histogram{MinMs: 0.05, Growth: 1.02, Width: 1, Buckets: []Bucket{{190, 700}, {200, 50}}},
		Index:     1, Pods: 2, QPS: 301, Rate: 150, Window: "profiling-overhead-s1-baseline",
		Start: time.UnixMilli(1795394937973).UTC(),
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("got  %+v\nwant %+v", got, want)
	}

	noHist, err := ParseResult(strings.Replace(goodSummary, `{"minMs":0.05,"growth":1.02,"width":1,"b":[190,700,10,50]}`, "null", 1))
	if err != nil || !noHist.Histogram.IsZero() {
		t.Errorf("a summary without histogram: %+v, %v", noHist, err)
	}
}

func TestParseResultErrors(t *testing.T) {
	cases := []struct {
		name, message, want string
	}{
		{"empty", "", "empty"},
		{"blank", " \n", "empty"},
		{"truncated", goodSummary[:200], "truncated after 200 bytes"},
		{"garbage", "panic: runtime error: invalid memory address", "not a summary"},
		{"another JSON", `{"status":"ok"}`, "format version 0"},
		{"newer format", strings.Replace(goodSummary, `"v":1`, `"v":2`, 1), "format version 2"},
		{"index outside the pods", strings.Replace(goodSummary, `"index":1`, `"index":2`, 1), "pod index 2 of 2"},
		{"more failures than requests", strings.Replace(goodSummary, `"failures":3`, `"failures":751`, 1), "751 failures of 750"},
		{"negative count", strings.Replace(goodSummary, `"dropped":0`, `"dropped":-1`, 1), "negative counts"},
		{"damaged histogram", strings.Replace(goodSummary, `[190,700,10,50]`, `[190,700,10]`, 1), "histogram"},
		{"wrong type", strings.Replace(goodSummary, `"requests":750`, `"requests":"many"`, 1), "not a summary"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r, err := ParseResult(tc.message)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("got %+v, %v; want an error with %q", r, err, tc.want)
			}
		})
	}
}

// pod is a parsed result of pod index of pods in a 500 req/s window, with the
// given latencies in its histogram, or with 5 ms for each iteration.
func pod(index, pods int32, iterations int64, samples ...float64) *PodResult {
	if len(samples) == 0 {
		for range iterations {
			samples = append(samples, 5)
		}
	}
	h := histogramOf(samples)
	return &PodResult{
		Requests: iterations, Iterations: iterations, Index: index, Pods: pods, QPS: 500,
		P50Ms: h.Quantile(0.5), P95Ms: h.Quantile(0.95), P99Ms: h.Quantile(0.99), MaxMs: 1000, Histogram: h,
	}
}

var window500 = Window{Stage: 0, Variant: perfv1.VariantBaseline, QPS: 500, Duration: 10 * time.Second}

func TestCombineSums(t *testing.T) {
	a, b := pod(0, 2, 2500), pod(1, 2, 2500)
	a.Failures, b.Failures = 4, 6
	a.Requests, b.Requests = 2500, 2500
	load, invalid := Combine([]*PodResult{b, nil, a}, window500)
	if len(invalid) > 0 {
		t.Errorf("flagged: %q", invalid)
	}
	if load.Requests != 5000 || load.Failures != 10 || load.DroppedIterations != 0 || load.AchievedQPS != 500 {
		t.Errorf("load %+v", load)
	}
}

// TestCombineMergesPercentiles: several pods' percentiles come from the merged
// histograms (within 2 % of the exact ones), not from averaging the pods'.
func TestCombineMergesPercentiles(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	fast, slow := logNormal(r, 2500, 5, 0.3), logNormal(r, 2500, 50, 0.3)
	load, invalid := Combine([]*PodResult{pod(0, 2, 2500, fast...), pod(1, 2, 2500, slow...)}, window500)
	if len(invalid) > 0 {
		t.Errorf("flagged: %q", invalid)
	}
	all := slices.Sorted(slices.Values(append(slices.Clone(fast), slow...)))
	for _, c := range []struct {
		p, got float64
	}{{0.5, load.P50Ms}, {0.95, load.P95Ms}, {0.99, load.P99Ms}} {
		if exact := exactPercentile(all, c.p); c.got < exact*0.98 || c.got > exact*1.02 {
			t.Errorf("p%g %g ms, exact %g ms", c.p*100, c.got, exact)
		}
	}

	single := pod(0, 1, 5000, fast...)
	single.P50Ms, single.P95Ms, single.P99Ms = 5.123, 8.456, 9.789
	if load, _ := Combine([]*PodResult{single}, window500); load.P50Ms != 5.123 || load.P95Ms != 8.456 || load.P99Ms != 9.789 {
		t.Errorf("one pod's exact percentiles were not used: %+v", load)
	}
}

func TestCombineFlags(t *testing.T) {
	cases := []struct {
		name    string
		results []*PodResult
		want    []string
	}{
		{"exactly 1% below", []*PodResult{pod(0, 1, 4950)}, nil},
		{"just over 1% below", []*PodResult{pod(0, 1, 4949)}, []string{"achieved 494.9 req/s, 1.0% below the target 500"}},
		{"well below", []*PodResult{pod(0, 1, 4892)}, []string{"achieved 489.2 req/s, 2.2% below the target 500"}},
		{"exactly 1% above", []*PodResult{pod(0, 1, 5050)}, nil},
		{"just over 1% above", []*PodResult{pod(0, 1, 5051)}, []string{"achieved 505.1 req/s, 1.0% above the target 500"}},
		{"dropped", []*PodResult{func() *PodResult { p := pod(0, 1, 5000); p.DroppedIterations = 31; return p }()},
			[]string{"dropped 31 iterations: the load generator, not the target, fell short"}},
		{"missing pod", []*PodResult{pod(0, 3, 1667), pod(2, 3, 1666)}, []string{
			"results from 2 of 3 k6 pods (missing pod 1)",
			"achieved 333.3 req/s, 33.3% below the target 500",
		}},
		{"no results", []*PodResult{nil}, []string{
			"no k6 pod reported results for the window",
			"achieved 0.0 req/s, 100.0% below the target 500",
		}},
		{"twice the same pod", []*PodResult{pod(0, 2, 2500), pod(0, 2, 2500), pod(1, 2, 2500)},
			[]string{"two results for k6 pod 0; the second is ignored"}},
		{"another window's pod", []*PodResult{func() *PodResult { p := pod(0, 1, 5000); p.QPS = 400; return p }()},
			[]string{"k6 pod 0 ran a 400 req/s window, not 500: its results belong to another window"}},
		{"a pod without histogram", []*PodResult{pod(0, 2, 2500), func() *PodResult { p := pod(1, 2, 2500); p.Histogram = Histogram{}; return p }()},
			[]string{"k6 pod 1 reported no latency histogram, so the pods' percentiles cannot be merged"}},
		{"histograms missing requests", []*PodResult{pod(0, 2, 2500, 5), pod(1, 2, 2500, 5)}, []string{
			"the latency histograms count 2 of 5000 requests (redirects, and requests made through named imports of k6/http, are not counted), so the merged percentiles leave some out",
		}},
		{"hand-built result", []*PodResult{{Requests: 5000, P50Ms: 2, P95Ms: 5, P99Ms: 9}}, nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, got := Combine(tc.results, window500)
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("got %q\nwant %q", got, tc.want)
			}
		})
	}
}

// TestCombineAllowsOneExtraIterationPerPod: k6 may start one iteration at the
// very end of each pod's run; that is no reason to distrust a short window.
func TestCombineAllowsOneExtraIterationPerPod(t *testing.T) {
	w := Window{Stage: 0, Variant: perfv1.VariantBaseline, QPS: 1, Duration: 20 * time.Second}
	p := pod(0, 1, 21)
	p.QPS = 1
	if _, invalid := Combine([]*PodResult{p}, w); len(invalid) > 0 {
		t.Errorf("flagged: %q", invalid)
	}
	p.Iterations, p.Requests = 22, 22
	if _, invalid := Combine([]*PodResult{p}, w); len(invalid) != 1 {
		t.Errorf("two extra iterations of one pod: %q", invalid)
	}
}
