package metrics

import (
	"context"
	"math"
	"strings"
	"testing"
	"time"

	metricsv1beta1 "k8s.io/metrics/pkg/apis/metrics/v1beta1"
)

func TestExpectAddsUnknownSamplesForReadyPodsWithoutData(t *testing.T) {
	at := time.Date(2026, 11, 27, 10, 0, 0, 0, time.UTC)
	ok := func(pod string) Sample {
		return Sample{Time: at, Window: time.Minute, Pod: pod, CPUCores: 0.4, WorkingSetBytes: 1e9, HeapBytes: Unknown}
	}
	for _, tc := range []struct {
		name  string
		got   []Sample
		ready []string
		want  string // pods in order, "?" after a placeholder
	}{
		{"all ready pods answered", []Sample{ok("a"), ok("b")}, []string{"a", "b"}, "a b"},
		{"one of two answered", []Sample{ok("a")}, []string{"a", "b"}, "a b?"},
		{"a pod that is not ready is kept", []Sample{ok("a"), ok("c")}, []string{"a"}, "a c"},
		{"no ready pods known", []Sample{ok("a")}, nil, "a"},
		{"nothing answered", nil, []string{"a"}, "a?"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out := Expect(tc.got, tc.ready)
			var pods []string
			for _, s := range out {
				p := s.Pod
				if math.IsNaN(s.CPUCores) && math.IsNaN(s.WorkingSetBytes) && math.IsNaN(s.HeapBytes) {
					p += "?"
					if len(tc.got) > 0 && (!s.Time.Equal(at) || s.Window != time.Minute) {
						t.Errorf("placeholder for %s at %s/%s, want the instant's time and window", s.Pod, s.Time, s.Window)
					}
				}
				pods = append(pods, p)
			}
			if got := strings.Join(pods, " "); got != tc.want {
				t.Fatalf("got %q, want %q", got, tc.want)
			}
		})
	}
}

func TestProblemMakesAnyUnusableValueAMissingInstant(t *testing.T) {
	s := func(pod string, cpu, mem, heap float64) Sample {
		return Sample{Pod: pod, CPUCores: cpu, WorkingSetBytes: mem, HeapBytes: heap}
	}
	nan, inf := math.NaN(), math.Inf(1)
	for _, tc := range []struct {
		name  string
		group []Sample
		want  string // "" or a part of the message
	}{
		{"complete", []Sample{s("a", 0.4, 1e9, 5e8), s("b", 0.4, 1e9, 5e8)}, ""},
		{"no heap exported is fine", []Sample{s("a", 0.4, 1e9, nan)}, ""},
		{"zero use is a value", []Sample{s("a", 0, 0, 0)}, ""},
		{"empty", nil, "no samples"},
		{"a pod without data", []Sample{s("a", 0.4, 1e9, nan), s("b", nan, nan, nan)}, "1 of 2 pods without usable values (pod b: cpu no value, memory no value)"},
		{"cpu NaN", []Sample{s("a", nan, 1e9, nan)}, "pod a: cpu no value"},
		{"memory +Inf", []Sample{s("a", 0.4, inf, nan)}, "pod a: memory +Inf"},
		{"cpu -Inf", []Sample{s("a", math.Inf(-1), 1e9, nan)}, "pod a: cpu -Inf"},
		{"negative cpu", []Sample{s("a", -0.1, 1e9, nan)}, "pod a: cpu -0.1"},
		{"negative memory", []Sample{s("a", 0.1, -5, nan)}, "pod a: memory -5"},
		{"heap +Inf", []Sample{s("a", 0.1, 1e9, inf)}, "pod a: heap +Inf"},
		{"both pods bad, sorted", []Sample{s("b", nan, 1e9, nan), s("a", inf, 1e9, nan)}, "2 of 2 pods without usable values (pod a: cpu +Inf; pod b: cpu no value)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := Problem(tc.group)
			if (tc.want == "") != (got == "") || !strings.Contains(got, tc.want) {
				t.Fatalf("Problem = %q, want %q", got, tc.want)
			}
		})
	}
}

func TestFiniteReplacesUnusableValuesWithUnknown(t *testing.T) {
	in := []Sample{
		{Pod: "a", CPUCores: math.Inf(1), WorkingSetBytes: math.Inf(1), HeapBytes: -1},
		{Pod: "b", CPUCores: 0.5, WorkingSetBytes: 2e9, HeapBytes: 1e9},
	}
	out := FiniteAll(in)
	if !math.IsNaN(out[0].CPUCores) || !math.IsNaN(out[0].WorkingSetBytes) || !math.IsNaN(out[0].HeapBytes) {
		t.Fatalf("unusable values kept: %+v", out[0])
	}
	if out[1] != in[1] {
		t.Fatalf("usable values changed: %+v", out[1])
	}
	if !math.IsInf(in[0].CPUCores, 1) {
		t.Fatal("FiniteAll modified its input")
	}
}

// Same for metrics-server: a ready pod it has no PodMetrics for (a pod it has
// not scraped yet, a kubelet it cannot reach), a container without the
// measured one, or a negative quantity makes the instant missing.
func TestMetricsServerPartialAnswersAreIncomplete(t *testing.T) {
	app := map[string]string{"app": "api"}
	ready := []string{"api-1", "api-2"}
	for _, tc := range []struct {
		name string
		pods []*metricsv1beta1.PodMetrics
		want string
	}{
		{"both pods", []*metricsv1beta1.PodMetrics{
			podMetrics("shop", "api-1", app, t0, usage("api", "400m", "1Gi")),
			podMetrics("shop", "api-2", app, t0, usage("api", "410m", "1Gi")),
		}, ""},
		{"one of two pods", []*metricsv1beta1.PodMetrics{
			podMetrics("shop", "api-1", app, t0, usage("api", "400m", "1Gi")),
		}, "1 of 2 pods without usable values (pod api-2: cpu no value, memory no value)"},
		{"no memory for a pod", []*metricsv1beta1.PodMetrics{
			podMetrics("shop", "api-1", app, t0, usage("api", "400m", "1Gi")),
			podMetrics("shop", "api-2", app, t0, usage("api", "410m", "")),
		}, "pod api-2: memory no value"},
		{"a negative quantity", []*metricsv1beta1.PodMetrics{
			podMetrics("shop", "api-1", app, t0, usage("api", "-1", "1Gi")),
			podMetrics("shop", "api-2", app, t0, usage("api", "410m", "1Gi")),
		}, "pod api-1: cpu -1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := NewMetricsServer(fakeMetrics(t, tc.pods...))
			got, err := p.Sample(context.Background(), Target{Namespace: "shop", Pods: ready, PodSelector: "app=api", Container: "api"})
			if err != nil {
				t.Fatal(err)
			}
			problem := Problem(Expect(got, ready))
			if (tc.want == "") != (problem == "") || !strings.Contains(problem, tc.want) {
				t.Fatalf("Problem = %q, want %q", problem, tc.want)
			}
		})
	}
}
