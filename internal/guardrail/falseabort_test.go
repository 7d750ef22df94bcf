package guardrail

import (
	"encoding/json"
	"os"
	"testing"
)

// TestHealthyHistoriesFromTheSweep: the histories (64 points each, as the
// State keeps them) of the three evaluations in a row that aborted healthy
// pods in the full sweep of test/bench/guardrail (make bench-guardrail,
// 2026-11-28), before the rule learnt to tell them from leaks. Each must now
// be judged no breach, and the evidence that tripped must be the one that
// holds back.
func TestHealthyHistoriesFromTheSweep(t *testing.T) {
	cases := []struct {
		file, what string
		was        evidence
	}{
		// Healthy run 126 at 0.3 % Gaussian noise: GC every 90 s ± 10 %, 15 s
		// samples, a 1.48 GB cache fill over 35 s. The fill lands part-way at
		// one GC and in full at the next; with the sampling phase drifting up
		// over the three floors before it, the floors rise 1.24 → 1.41 → 1.65
		// → 2.23 → 2.68 GB and stay at 2.77–3.10 GB. Over all 11 floors the
		// thirds and both halves (which share the part-way floor) rose: a
		// floor trend of +143 MiB/min.
		{"fill-over-two-gcs-trend.json", "a cache fill spread over two GCs", evidenceTrend},
		// Healthy run 266 at 2 % Gaussian noise: GC every 90 s ± 10 %, 15 s
		// samples, a 1.52 GB step of the live set just after a GC. The next
		// two floors are 3.09 and 2.63 GB (usual 1.2–1.65 GB); the raised
		// teeth, noisier at their level, came out 4.2–4.6 noise σ steeper
		// than the reference's: a jump of +389 MiB/min.
		{"step-at-gc-jump.json", "a 1.5 GB step at a GC", evidenceJump},
	}
	theta := float64(100<<20) / 60
	for _, c := range cases {
		b, err := os.ReadFile("testdata/" + c.file)
		if err != nil {
			t.Fatal(err)
		}
		var hist []PodTrack
		if err := json.Unmarshal(b, &hist); err != nil {
			t.Fatal(err)
		}
		if len(hist) != 3 {
			t.Fatalf("%s: %d histories, want 3", c.file, len(hist))
		}
		for i, p := range hist {
			w := newWorkspace()
			tm, y := p.points(nil, nil)
			if v := w.assess(tm, y, theta); v.breach {
				t.Errorf("%s, evaluation %d: breach by evidence %d (%.0f MiB/min), want none", c.what, i, v.kind, v.slope*60/(1<<20))
			}
			// The evidence that tripped holds back on its own.
			w.clean(tm, y)
			spacing := w.spacing()
			sawtooth := w.segment(spacing) >= 2
			switch c.was {
			case evidenceTrend:
				if ok, _ := w.floorEvidence(sawtooth, spacing, theta); ok {
					t.Errorf("%s, evaluation %d: the floor trend trips", c.what, i)
				}
			case evidenceJump:
				if _, ok := w.jumpEvidence(spacing, theta); ok {
					t.Errorf("%s, evaluation %d: the jump trips", c.what, i)
				}
			}
		}
	}
}
