package guardrail

import (
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/resource"

	perfv1 "perfexp.dev/perf-operator/api/v1alpha1"
)

func TestConfigFrom(t *testing.T) {
	q := func(s string) *resource.Quantity { v := resource.MustParse(s); return &v }
	defaulted := func(edit func(*perfv1.PerfExperimentSpec)) *perfv1.PerfExperimentSpec {
		e := &perfv1.PerfExperiment{Spec: perfv1.PerfExperimentSpec{Toggle: &perfv1.ToggleSpec{JVMOption: "-Xint"}}}
		e.Default()
		if edit != nil {
			edit(&e.Spec)
		}
		return &e.Spec
	}
	cases := []struct {
		name    string
		spec    *perfv1.PerfExperimentSpec
		want    Config
		wantErr string
	}{
		{"defaults", defaulted(nil),
			Config{MaxGrowthPerMinute: 100 << 20, MaxUtilization: 0.9, ConsecutiveBreaches: 3, Interval: 15 * time.Second}, ""},
		{"set", defaulted(func(s *perfv1.PerfExperimentSpec) {
			s.Guardrails.Heap.MaxGrowthPerMinute = q("1Gi")
			s.Guardrails.Heap.MaxUtilization = "85.5%"
			s.Guardrails.Heap.ConsecutiveBreaches = 5
			s.Guardrails.MaxRestarts = 2
			s.Metrics.Interval = "30s"
		}), Config{MaxGrowthPerMinute: 1 << 30, MaxUtilization: 0.855, ConsecutiveBreaches: 5, MaxRestarts: 2, Interval: 30 * time.Second}, ""},
		{"not defaulted", &perfv1.PerfExperimentSpec{Toggle: &perfv1.ToggleSpec{JVMOption: "-Xint"}},
			Config{MaxGrowthPerMinute: 100 << 20, MaxUtilization: 0.9, ConsecutiveBreaches: 3, Interval: 15 * time.Second}, ""},
		{"load-only sweep: no growth rule", defaulted(func(s *perfv1.PerfExperimentSpec) { s.Toggle = nil }),
			Config{MaxGrowthPerMinute: 100 << 20, MaxUtilization: 0.9, ConsecutiveBreaches: 3, Interval: 15 * time.Second, NoGrowth: true}, ""},
		{"decimal quantity", defaulted(func(s *perfv1.PerfExperimentSpec) { s.Guardrails.Heap.MaxGrowthPerMinute = q("500M") }),
			Config{MaxGrowthPerMinute: 500e6, MaxUtilization: 0.9, ConsecutiveBreaches: 3, Interval: 15 * time.Second}, ""},
		{"zero growth", defaulted(func(s *perfv1.PerfExperimentSpec) { s.Guardrails.Heap.MaxGrowthPerMinute = q("0") }),
			Config{}, "spec.guardrails.heap.maxGrowthPerMinute"},
		{"bad percent", defaulted(func(s *perfv1.PerfExperimentSpec) { s.Guardrails.Heap.MaxUtilization = "90" }),
			Config{}, "spec.guardrails.heap.maxUtilization"},
		{"bad interval", defaulted(func(s *perfv1.PerfExperimentSpec) { s.Metrics.Interval = "15" }),
			Config{}, "spec.metrics.interval"},
		{"negative restarts", defaulted(func(s *perfv1.PerfExperimentSpec) { s.Guardrails.MaxRestarts = -1 }),
			Config{}, "spec.guardrails.maxRestarts"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, err := ConfigFrom(c.spec)
			if c.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), c.wantErr) {
					t.Fatalf("error %v, want one naming %s", err, c.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got != c.want {
				t.Errorf("got %+v\nwant %+v", got, c.want)
			}
		})
	}
}
