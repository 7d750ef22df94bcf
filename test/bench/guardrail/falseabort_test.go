package guardrailbench

import (
	"testing"

	"perfexp.dev/perf-operator/internal/guardrail/heapsim"
)

// TestSweepFalseAborts replays, whole, the healthy runs of the full sweep
// (TestFalseAborts with PERF_BENCH_FULL=1: 10 hours guarded) that aborted
// before the rule learnt to tell them from leaks (2026-11-28; the README
// lists them). Each takes well under a second, so they run in the default
// subset too. internal/guardrail's TestHealthyHistoriesFromTheSweep holds
// the histories of their aborting evaluations.
func TestSweepFalseAborts(t *testing.T) {
	for _, c := range []struct {
		noise float64
		run   int
		what  string
	}{
		{0.003, 126, "periodic cache fills, GC 90 s ± 10 %: a 1.48 GB fill over 35 s spread over two GCs (floor trend)"},
		{0.02, 266, "steps ≤ 15 % of limit, GC 90 s ± 10 %: a 1.52 GB step just after a GC (jump)"},
	} {
		if o := healthyRun(c.noise, heapsim.Gaussian, c.run, 10*hour).play(); o.breach != nil {
			t.Errorf("%.1f%% Gaussian run %d (%s): aborted after %.0f s: %s", 100*c.noise, c.run, c.what, o.after, o.breach.Message)
		}
	}
}
