package guardrailbench

import (
	"testing"

	"perfexp.dev/perf-operator/internal/guardrail/heapsim"
)

// TestSweepFalseAborts replays, whole, the healthy runs of the full sweep
// (TestFalseAborts with PERF_BENCH_FULL=1: 10 hours guarded), on its own
// seeds and on seeds shifted by 5,000,000, 10,000,000 and 20,000,000, that aborted before the rule
// learnt to tell them from leaks (2026-11-28; the README lists them). Each takes well under a second, so they run in the default
// subset too. internal/guardrail's TestHealthyHistoriesFromTheSweep holds
// the histories of their aborting evaluations.
func TestSweepFalseAborts(t *testing.T) {
	for _, c := range []struct {
		noise  float64
		kind   heapsim.NoiseKind
		run    int
		offset uint64
		what   string
	}{
		{0.003, heapsim.Gaussian, 126, 0, "periodic cache fills, GC 90 s ± 10 %: a 1.48 GB fill over 35 s spread over two GCs (floor trend)"},
		{0.02, heapsim.Gaussian, 266, 0, "steps ≤ 15 % of limit, GC 90 s ± 10 %: a 1.52 GB step just after a GC (jump)"},
		// Seeds shifted by 5,000,000 (make bench-guardrail SEED_OFFSET=5000000).
		{0.003, heapsim.StudentT3, 531, 5_000_000, "allocation-only toggle, GC exactly 60 s: a floor sampled one interval late (jump)"},
		{0.01, heapsim.StudentT3, 531, 5_000_000, "allocation-only toggle, GC exactly 60 s: a floor sampled one interval late (jump)"},
		{0.02, heapsim.StudentT3, 531, 5_000_000, "allocation-only toggle, GC exactly 60 s: a floor sampled one interval late (jump)"},
		{0.01, heapsim.Gaussian, 289, 5_000_000, "periodic cache fills, Go working set: flat steps after a 1.4 GB fill (ramp)"},
		{0.02, heapsim.Gaussian, 289, 5_000_000, "periodic cache fills, Go working set: flat steps after a 1.4 GB fill (ramp)"},
		{0.03, heapsim.StudentT3, 41, 5_000_000, "periodic cache fills, GC exactly 60 s: a low floor, then a fill over two GCs (rise)"},
		// Seeds shifted by 10,000,000 (make bench-guardrail SEED_OFFSET=10000000).
		{0.03, heapsim.StudentT3, 181, 10_000_000, "steps ≤ 15 % of limit, GC exactly 60 s: a 1.4 GB step hiding its GC (jump)"},
		{0.03, heapsim.StudentT3, 421, 10_000_000, "steps ≤ 15 % of limit, GC exactly 60 s: a 1.7 GB step hiding its GC (jump)"},
		{0.003, heapsim.StudentT3, 522, 10_000_000, "periodic cache fills, GC 120 s ± 10 % every 30 s: a fill part-way at the middle floor (floor trend)"},
		// The last two, at 5,000,000 and 20,000,000 (2026-11-28, ninth session).
		{0.02, heapsim.StudentT3, 41, 5_000_000, "periodic cache fills, GC exactly 60 s: a fill over two GCs, then a floor read high (rise)"},
		{0.03, heapsim.StudentT3, 206, 20_000_000, "periodic cache fills, GC 90 s ± 10 %: a fill over two GCs, then a floor sampled late (rise)"},
	} {
		if o := healthyRun(c.noise, c.kind, c.run, c.offset, 10*hour).play(); o.breach != nil {
			t.Errorf("%.1f%% %s run %d, seed offset %d (%s): aborted after %.0f s: %s", 100*c.noise, c.kind, c.run, c.offset, c.what, o.after, o.breach.Message)
		}
	}
}

// TestSeedOffset: PERF_BENCH_SEED_OFFSET shifts the seeds (unset is 0), a
// malformed value is refused rather than read as 0, and the shift reaches
// the runs: a shifted healthy run is another trace.
func TestSeedOffset(t *testing.T) {
	t.Setenv(seedOffsetEnv, "")
	if o, err := seedOffset(); err != nil || o != 0 {
		t.Errorf("unset: %d, %v; want 0", o, err)
	}
	t.Setenv(seedOffsetEnv, "5000000")
	if o, err := seedOffset(); err != nil || o != 5_000_000 {
		t.Errorf("5000000: %d, %v", o, err)
	}
	for _, bad := range []string{"-1", "5e6", "x"} {
		t.Setenv(seedOffsetEnv, bad)
		if _, err := seedOffset(); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
	a, b := healthyRun(0.01, heapsim.Gaussian, 3, 0, hour), healthyRun(0.01, heapsim.Gaussian, 3, 5_000_000, hour)
	ha, _ := a.pods[0].sim.Sample(a.toggle)
	hb, _ := b.pods[0].sim.Sample(a.toggle)
	if a.toggle == b.toggle && ha == hb {
		t.Error("the offset does not change the run")
	}
}
