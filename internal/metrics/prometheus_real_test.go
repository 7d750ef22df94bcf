package metrics

import (
	"context"
	"errors"
	"math"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/common/model"
)

// at is the instant the tests query: inside the data, on a sample.
func (s *promServer) at() time.Time { return s.end.Add(-20 * time.Minute) }

// sec is at's offset into the data, the argument of the series' value functions.
func (s *promServer) sec(t time.Time) float64 { return t.Sub(s.start).Seconds() }

func near(t *testing.T, what string, got, want, relTol float64) {
	t.Helper()
	if math.IsNaN(got) || math.Abs(got-want) > relTol*math.Max(math.Abs(want), 1e-12) {
		t.Errorf("%s = %v, want %v (±%g relative)", what, got, want, relTol)
	}
}

func TestRealPrometheusDefaultQueries(t *testing.T) {
	s := realPrometheus(t)
	at := s.at()
	sec := s.sec(at)
	p := NewPrometheus(s.api, DefaultQueries(), WithClock(func() time.Time { return at }), WithInterval(15*time.Second))
	got, err := p.Sample(context.Background(), Target{
		Namespace: nsShop, Container: ctrApp, PodSelector: "app=api",
		Pods: []string{"api-2", "api-1", "api-10", "api-gone"},
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 3 {
		t.Fatalf("got %d samples, want 3 (api-gone has no data): %+v", len(got), got)
	}
	wantHeap := map[string]float64{
		"api-1":  100<<20 + 100*sec + 200<<20, // Eden + Old Gen, not Metaspace
		"api-10": 20<<20 + 10*sec,             // Go
		"api-2":  10<<20 + 20<<20,             // OpenTelemetry names, not non_heap
	}
	for i, pod := range []string{"api-1", "api-10", "api-2"} {
		g := got[i]
		if g.Pod != pod || !g.Time.Equal(at) {
			t.Errorf("sample %d: pod %q at %s, want %q at %s", i, g.Pod, g.Time, pod, at)
		}
		near(t, pod+" cpu", g.CPUCores, cpuRate[pod], 1e-9)
		near(t, pod+" working set", g.WorkingSetBytes, wsOf(pod, sec), 1e-12)
		near(t, pod+" heap", g.HeapBytes, wantHeap[pod], 1e-12)
		near(t, pod+" time in GC", g.GCSecondsPerSecond, gcRate[pod], 1e-9)
	}
}

func TestRealPrometheusAnchoredPodRegex(t *testing.T) {
	s := realPrometheus(t)
	at := s.at()
	p := NewPrometheus(s.api, DefaultQueries(), WithClock(func() time.Time { return at }))
	for _, tc := range []struct {
		pod   string
		other string
		ws    float64
	}{
		{"api-1", "api-10", wsOf("api-1", s.sec(at))}, // a prefix must not match longer names
		{"web.1", "webx1", 1},                         // a dot is not a wildcard
	} {
		got, err := p.Sample(context.Background(), Target{Namespace: nsShop, Container: ctrApp, Pods: []string{tc.pod}})
		if err != nil {
			t.Fatal(err)
		}
		if len(got) != 1 || got[0].Pod != tc.pod {
			t.Fatalf("pod %q: got %+v, want one sample of %q (not %q)", tc.pod, got, tc.pod, tc.other)
		}
		near(t, tc.pod+" working set", got[0].WorkingSetBytes, tc.ws, 1e-12)
		// The provider also drops series of other pods; the query itself must
		// not select them either.
		if pods := queryPods(t, s, DefaultQueries().Memory, Target{Namespace: nsShop, Container: ctrApp, Pods: []string{tc.pod}}); strings.Join(pods, ",") != tc.pod {
			t.Errorf("pod %q: the memory query selects %v", tc.pod, pods)
		}
	}
}

// queryPods expands tmpl for tgt, runs it at s.at() and returns the pod labels
// of the result, unfiltered.
func queryPods(t *testing.T, s *promServer, tmpl string, tgt Target) []string {
	t.Helper()
	q, err := expand(tmpl, templateValues{namespace: tgt.Namespace, container: tgt.Container, pods: tgt.Pods, rng: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	val, _, err := s.api.Query(context.Background(), q, s.at())
	if err != nil {
		t.Errorf("%s: %v", q, err)
		return nil
	}
	var pods []string
	for _, smp := range val.(model.Vector) {
		pods = append(pods, string(smp.Metric["pod"])+fmtLabels(smp.Metric))
	}
	slices.Sort(pods)
	return pods
}

// fmtLabels marks a series without a pod label, which only an injected
// expression could return.
func fmtLabels(m model.Metric) string {
	if _, ok := m["pod"]; ok {
		return ""
	}
	return m.String()
}

// TestRealPrometheusHostileNames queries a target whose namespace, pod and
// container names try to break out of strings and regexes: only its own series
// may come back, and queries built from attack strings must select nothing.
func TestRealPrometheusHostileNames(t *testing.T) {
	s := realPrometheus(t)
	at := s.at()
	p := NewPrometheus(s.api, DefaultQueries(), WithClock(func() time.Time { return at }))
	got, err := p.Sample(context.Background(), Target{Namespace: evilNS, Container: evilCtr, Pods: []string{evilPod}})
	if err != nil {
		t.Errorf("hostile target: %v", err)
	} else if len(got) != 1 || got[0].Pod != evilPod {
		t.Errorf("got %+v, want one sample of the hostile pod", got)
	} else {
		near(t, "hostile cpu", got[0].CPUCores, 0.75, 1e-9)
		near(t, "hostile working set", got[0].WorkingSetBytes, 777, 0)
		if !math.IsNaN(got[0].HeapBytes) {
			t.Errorf("hostile heap = %v, want NaN", got[0].HeapBytes)
		}
	}

	for _, tgt := range []Target{
		{Namespace: `shop"} or vector(1) or x{a="`, Container: ctrApp, Pods: []string{"api-1"}},
		{Namespace: nsShop, Container: `app"} or container_memory_working_set_bytes{container="app`, Pods: []string{"api-1"}},
		{Namespace: nsShop, Container: ctrApp, Pods: []string{`.*`}},
		{Namespace: nsShop, Container: ctrApp, Pods: []string{`api-1|api-10`}},
		{Namespace: nsShop, Container: ctrApp, Pods: []string{"\"})\nor vector(1)\n#"}},
		{Namespace: nsShop, Container: ctrApp, Pods: []string{`api-1\`}},
	} {
		got, err := p.Sample(context.Background(), tgt)
		if err != nil {
			t.Errorf("%+v: %v", tgt, err)
			continue
		}
		if len(got) != 0 {
			t.Errorf("%+v: got %+v, want no samples", tgt, got)
		}
		for _, m := range DefaultQueries().each() {
			if pods := queryPods(t, s, m.tmpl, tgt); len(pods) != 0 {
				t.Errorf("%+v: the %s query selects %v, want nothing", tgt, m.name, pods)
			}
		}
	}
	if pods := queryPods(t, s, DefaultQueries().CPU, Target{Namespace: evilNS, Container: evilCtr, Pods: []string{evilPod}}); len(pods) != 1 || pods[0] != evilPod {
		t.Errorf("the hostile target's cpu query selects %q, want only %q", pods, evilPod)
	}
}

// TestRealPrometheusStringRoundTrip proves escapeString against the real PromQL
// parser: each hostile string, escaped into a "…" or '…' literal, arrives intact.
func TestRealPrometheusStringRoundTrip(t *testing.T) {
	s := realPrometheus(t)
	for _, v := range []string{
		`plain`, `"`, `'`, "`", `\`, `\\"`, "a\nb\r\tc", "\x00\x01\x7f", "é ü 日本 🙂", "\u00a0\u2028\ufeff",
		`"} or vector(1) #`, `\"}`, `${{namespace}}`, "line1\nline2\"'\\",
	} {
		for _, quote := range []byte{'"', '\''} {
			q := `label_replace(vector(1), "v", ` + string(quote) + escapeString(v, quote) + string(quote) + `, "", "")`
			val, _, err := s.api.Query(context.Background(), q, time.Time{})
			if err != nil {
				t.Errorf("%q in %c: %v (query %s)", v, quote, err, q)
				continue
			}
			vec, ok := val.(model.Vector)
			if !ok || len(vec) != 1 || string(vec[0].Metric["v"]) != v {
				t.Errorf("%q in %c: got %v, want label v=%q (query %s)", v, quote, val, v, q)
			}
		}
	}
}

func TestRealPrometheusUserQueries(t *testing.T) {
	s := realPrometheus(t)
	at := s.at()
	q := Queries{
		// Backtick and single-quoted strings, a literal range, irate.
		CPU: "sum by (pod) (irate(container_cpu_usage_seconds_total{namespace=`{{namespace}}`,pod=~'{{pod}}',container=\"{{container}}\"}[2m]))",
		// A comment with a placeholder in it, left alone.
		Memory: "# working set of {{pod}}\nmax by (pod) (max_over_time(container_memory_working_set_bytes{namespace=\"{{ namespace }}\",pod=~\"{{pod}}\",container=\"{{container}}\"}[{{range}}]))",
		// Other label names, renamed to pod.
		Heap: `label_replace(app_heap_bytes{kubernetes_namespace="{{namespace}}",kubernetes_pod=~"{{pod}}"}, "pod", "$1", "kubernetes_pod", "(.*)")`,
		// Only Micrometer's pause timer, which the default ranks second.
		GC: `sum by (pod) (rate(jvm_gc_pause_seconds_sum{namespace="{{namespace}}",pod=~"{{pod}}"}[{{range}}]))`,
	}
	if err := q.Validate(); err != nil {
		t.Fatal(err)
	}
	p := NewPrometheus(s.api, q, WithClock(func() time.Time { return at }), WithInterval(2*time.Minute))
	got, err := p.Sample(context.Background(), Target{Namespace: nsShop, Container: ctrApp, Pods: []string{"api-1", "api-10"}})
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 {
		t.Fatalf("got %+v, want api-1 and api-10", got)
	}
	near(t, "api-1 irate", got[0].CPUCores, 0.25, 1e-9)
	near(t, "api-10 irate", got[1].CPUCores, 1.5, 1e-9)
	near(t, "api-1 max working set", got[0].WorkingSetBytes, wsOf("api-1", s.sec(at)), 1e-12)
	near(t, "api-1 user heap", got[0].HeapBytes, 123456789, 0)
	near(t, "api-1 user GC query", got[0].GCSecondsPerSecond, 0.5, 1e-9)
	if !math.IsNaN(got[1].GCSecondsPerSecond) {
		t.Errorf("api-10 user GC query = %v, want NaN (no Micrometer timer)", got[1].GCSecondsPerSecond)
	}
	if !math.IsNaN(got[1].HeapBytes) {
		t.Errorf("api-10 user heap = %v, want NaN (no app_heap_bytes)", got[1].HeapBytes)
	}

	// A hostile namespace containing a backtick cannot enter a `raw` string.
	_, err = p.Sample(context.Background(), Target{Namespace: evilNS, Container: ctrApp, Pods: []string{"x"}})
	if err == nil || !strings.Contains(err.Error(), "backtick") {
		t.Errorf("backtick in a raw string: err = %v, want a refusal", err)
	}
}

// The mean of per-interval CPU samples over a window is the window's average
// rate: what each pod was made to burn (0.25 and 1.5 cores).
func TestRealPrometheusSamplesAverageToTheWindow(t *testing.T) {
	s := realPrometheus(t)
	end := s.at()
	start := end.Add(-30 * time.Minute)
	tgt := Target{Namespace: nsShop, Container: ctrApp, Pods: []string{"api-1", "api-10"}}
	var now time.Time
	p := NewPrometheus(s.api, DefaultQueries(), WithInterval(time.Minute), WithClock(func() time.Time { return now }))
	var cpuSum float64
	var k int
	for now = start.Add(time.Minute); !now.After(end); now = now.Add(time.Minute) {
		smp, err := p.Sample(context.Background(), tgt)
		if err != nil {
			t.Fatal(err)
		}
		for _, x := range smp {
			cpuSum += x.CPUCores
		}
		k++
	}
	near(t, "mean of sampled cpu", cpuSum/float64(k), 0.25+1.5, 1e-9)
}

func TestRealPrometheusReachableAndErrors(t *testing.T) {
	s := realPrometheus(t)
	if err := Reachable(context.Background(), s.api); err != nil {
		t.Fatal(err)
	}
	// A syntax error in a user query: the error names the source, the query and
	// the HTTP status.
	p := NewPrometheus(s.api, Queries{CPU: `sum by (pod) (`, Memory: "x", Heap: "x"})
	_, err := p.Sample(context.Background(), Target{Namespace: nsShop, Container: ctrApp, Pods: []string{"api-1"}})
	var he *HTTPError
	if !errors.As(err, &he) || he.StatusCode != 400 || he.ErrorType != "bad_data" {
		t.Fatalf("err = %v, want an HTTPError 400 bad_data", err)
	}
	for _, want := range []string{"prometheus: cpu query failed", "HTTP 400 Bad Request from /api/v1/query", "bad_data", "query: sum by (pod) ("} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not contain %q", err, want)
		}
	}
	// A query that is not an instant vector.
	p = NewPrometheus(s.api, Queries{CPU: `container_cpu_usage_seconds_total{pod=~"{{pod}}"}[1m]`, Memory: "x", Heap: "x"})
	_, err = p.Sample(context.Background(), Target{Namespace: nsShop, Container: ctrApp, Pods: []string{"api-1"}})
	if err == nil || !strings.Contains(err.Error(), "returned a matrix") {
		t.Errorf("range query: err = %v, want 'returned a matrix'", err)
	}
}
