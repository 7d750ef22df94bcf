package engine

import (
	"math"
	"strings"
	"testing"

	perfv1 "perfexp.dev/perf-operator/api/v1alpha1"
	"perfexp.dev/perf-operator/internal/metrics"
)

// No numbers from partial data: an instant with a ready pod missing, or with a
// CPU or memory value that is NaN, ±Inf or negative, is a missing instant, not
// a smaller sum. Treatment windows made of such instants are invalid, so the
// verdict is not Pass, and no guardrail acts on the bad values.
func TestPartialMetricsNeverGiveAVerdict(t *testing.T) {
	inTreatment := func(w *world) bool { return w.exp.Status.Phase == perfv1.PhaseTreatment }
	onPod2 := func(f func(*metrics.Sample)) func(*world, []metrics.Sample) ([]metrics.Sample, string) {
		return func(w *world, got []metrics.Sample) ([]metrics.Sample, string) {
			if inTreatment(w) {
				f(&got[1])
			}
			return got, ""
		}
	}
	for _, tc := range []struct {
		name  string
		fault func(*world, []metrics.Sample) ([]metrics.Sample, string)
		// problem is a part of the treatment windows' Invalid message; "" when
		// they stay valid.
		problem string
	}{
		{"healthy source", nil, ""},
		{"answers for 1 of 2 pods", func(w *world, got []metrics.Sample) ([]metrics.Sample, string) {
			if inTreatment(w) {
				return got[:1], ""
			}
			return got, ""
		}, "pod app-2: cpu no value, memory no value"},
		{"NaN CPU", onPod2(func(s *metrics.Sample) { s.CPUCores = math.NaN() }), "pod app-2: cpu no value"},
		{"+Inf working set", onPod2(func(s *metrics.Sample) { s.WorkingSetBytes = math.Inf(1) }), "pod app-2: memory +Inf"},
		{"negative CPU", onPod2(func(s *metrics.Sample) { s.CPUCores = -0.4 }), "pod app-2: cpu -0.4"},
		{"+Inf heap", onPod2(func(s *metrics.Sample) { s.HeapBytes = math.Inf(1) }), "pod app-2: heap +Inf"},
		{"empty answer", func(w *world, got []metrics.Sample) ([]metrics.Sample, string) {
			if inTreatment(w) {
				return nil, "prometheus returned no samples for the target's pods"
			}
			return got, ""
		}, "returned no samples"},
		{"HTTP 500", func(w *world, got []metrics.Sample) ([]metrics.Sample, string) {
			if inTreatment(w) {
				return nil, "prometheus: cpu query failed: HTTP 500 Internal Server Error from /api/v1/query"
			}
			return got, ""
		}, "HTTP 500"},
		// A stray partial instant now and then is one missing sample, not an
		// invalid window.
		{"1 instant in 10 partial", func(w *world, got []metrics.Sample) ([]metrics.Sample, string) {
			if inTreatment(w) && w.now.Minute()%10 == 3 {
				return got[:1], ""
			}
			return got, ""
		}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			exp := seedExperiment()
			exp.Spec.SuccessCriteria = &perfv1.SuccessCriteria{MaxCPUOverhead: "10%"}
			w := newWorld(t, exp)
			w.metricsFault = tc.fault
			w.runToEnd()
			st := w.exp.Status
			if st.Phase != perfv1.PhaseSucceeded {
				t.Fatalf("phase %s, abort %+v", st.Phase, st.Abort)
			}
			for _, win := range st.Windows {
				if win.Variant != perfv1.VariantBaseline && win.Variant != perfv1.VariantTreatment {
					continue
				}
				valid := win.Valid != nil && *win.Valid
				wantValid := tc.problem == "" || win.Variant == perfv1.VariantBaseline
				if valid != wantValid {
					t.Fatalf("stage %d %s window valid %v, want %v: %v", win.Stage, win.Variant, valid, wantValid, win.Invalid)
				}
				if wantValid {
					continue
				}
				msg := strings.Join(win.Invalid, "; ")
				if !strings.HasPrefix(msg, "metrics for only ") || !strings.Contains(msg, tc.problem) {
					t.Fatalf("stage %d treatment window: invalid %q, want the missing samples and %q", win.Stage, msg, tc.problem)
				}
				if s := win.Series; s != nil && s.Points > 0 {
					t.Fatalf("stage %d treatment window summed partial instants: %s", win.Stage, s.CPU)
				}
			}
			want := perfv1.VerdictPass
			if tc.problem != "" {
				want = perfv1.VerdictInconclusive
			}
			if st.Verdict != want {
				t.Fatalf("verdict %s, want %s; summary %+v", st.Verdict, want, st.Summary)
			}
			for _, row := range st.Summary {
				if row.Trustworthy != (tc.problem == "") {
					t.Fatalf("stage %s trustworthy %v", row.Stage, row.Trustworthy)
				}
				if tc.problem == "" && (row.CPU == nil || math.Abs(row.CPU.Overhead-0.05) > 1e-3) {
					t.Fatalf("stage %s: CPU %+v, want the simulated +5%%", row.Stage, row.CPU)
				}
			}
		})
	}
}
