package engine

import (
	"strings"
	"testing"
	"time"

	perfv1 "perfexp.dev/perf-operator/api/v1alpha1"
	"perfexp.dev/perf-operator/internal/k6"
)

// steady is a k6 pod that keeps its rate: the counters after elapsed, with the
// failures (and dropped iterations) a function of the time.
func steady(failed func(w *world, win k6.Window, elapsed time.Duration) (failed, dropped int64)) func(*world, k6.Window, time.Duration) (k6.Live, bool) {
	return func(w *world, win k6.Window, elapsed time.Duration) (k6.Live, bool) {
		l := k6.Live{Requests: int64(float64(win.QPS) * elapsed.Seconds())}
		if failed != nil {
			l.Failed, l.Dropped = failed(w, win, elapsed)
		}
		return l, true
	}
}

// The error-rate guardrail on live counters: judged on every sample while a
// window runs, from the first toggle on, long before the Job ends.
func TestLiveErrorRate(t *testing.T) {
	type onset struct {
		variant perfv1.Variant
		after   time.Duration // into the window
	}
	for _, tc := range []struct {
		name  string
		at    onset
		share float64 // of the requests since onset that fail
		// reason is the abort wanted ("" for a successful run); message a part of it.
		reason, message string
		// exp is the experiment (default: the seed's runtime toggle).
		exp func() *perfv1.PerfExperiment
	}{
		{"40 % failing mid-treatment", onset{perfv1.VariantTreatment, 10 * time.Minute}, 0.4, perfv1.ReasonErrorRate,
			"requests between 08:", nil},
		{"failing while the toggle settles", onset{perfv1.VariantSettle, 0}, 0.5, perfv1.ReasonErrorRate,
			"in the settle window of stage 500, limit 1%", nil},
		{"below the limit", onset{perfv1.VariantTreatment, 0}, 0.005, "", "", nil},
		{"before the first toggle: not the toggle's doing", onset{perfv1.VariantBaseline, 0}, 0.5, "", "", nil},
		// A toggle that rolls the pods fails requests by its rollout: the settle
		// keeps that out, and the treatment window after it is still judged.
		{"an env toggle's rollout failing requests while it settles", onset{perfv1.VariantSettle, 0}, 0.5, "", "", envExperiment},
		{"an env toggle failing requests in its treatment", onset{perfv1.VariantTreatment, 5 * time.Minute}, 0.5, perfv1.ReasonErrorRate,
			"in the treatment window of stage 500", envExperiment},
	} {
		t.Run(tc.name, func(t *testing.T) {
			exp := seedExperiment()
			if tc.exp != nil {
				exp = tc.exp()
			}
			exp.Spec.Guardrails.ErrorRate = "1%"
			w := newWorld(t, exp)
			var onsetAt time.Time
			w.live = steady(func(w *world, win k6.Window, elapsed time.Duration) (int64, int64) {
				if win.Variant != tc.at.variant || win.Stage != 0 || elapsed < tc.at.after {
					return 0, 0
				}
				if onsetAt.IsZero() {
					onsetAt = w.now.Add(-(elapsed - tc.at.after))
				}
				return int64(tc.share * float64(win.QPS) * (elapsed - tc.at.after).Seconds()), 0
			})
			w.runToEnd()
			st := w.exp.Status
			if tc.reason == "" {
				if st.Phase != perfv1.PhaseSucceeded {
					t.Fatalf("phase %s, abort %+v", st.Phase, st.Abort)
				}
				return
			}
			if st.Phase != perfv1.PhaseAborted || st.Abort == nil || st.Abort.Reason != tc.reason || !strings.Contains(st.Abort.Message, tc.message) ||
				!strings.Contains(st.Abort.Message, "live from load Job") {
				t.Fatalf("phase %s, abort %+v", st.Phase, st.Abort)
			}
			// Within two sampling intervals (1m) of the onset, the Job far from its end.
			if took := st.Abort.At.Sub(onsetAt); took <= 0 || took > 2*time.Minute {
				t.Fatalf("aborted %s after the onset: %s", took, st.Abort.Message)
			}
			if w.applied {
				t.Fatal("toggle left applied")
			}
			t.Log(st.Abort.Message)
		})
	}
}

func TestLiveErrorRateNeedsEnoughRequests(t *testing.T) {
	exp := seedExperiment()
	exp.Spec.Stages = []perfv1.StageSpec{{QPS: 1}} // 60 requests a minute
	w := newWorld(t, exp)
	// Five of the first ten requests of each window fail, then none: the final
	// result (no failures in the simulation) and the live counts agree it is fine.
	w.live = func(w *world, win k6.Window, elapsed time.Duration) (k6.Live, bool) {
		n := int64(float64(win.QPS) * elapsed.Seconds())
		return k6.Live{Requests: min(n, 10), Failed: min(n, 10) / 2}, true
	}
	w.runToEnd()
	if st := w.exp.Status; st.Phase != perfv1.PhaseSucceeded {
		t.Fatalf("phase %s, abort %+v", st.Phase, st.Abort)
	}
}

// A measured window whose load falls short over an interval, or drops
// iterations, is flagged at once; k6 starting up (no load at the previous
// reading) is not a shortfall.
func TestLiveShortfallFlagsTheWindow(t *testing.T) {
	for _, tc := range []struct {
		name string
		live func(*world, k6.Window, time.Duration) (k6.Live, bool)
		want string // part of the treatment windows' Invalid entry; "" for none
	}{
		{"steady", steady(nil), ""},
		{"slow start", func(w *world, win k6.Window, elapsed time.Duration) (k6.Live, bool) {
			if elapsed < 90*time.Second {
				return k6.Live{}, true
			}
			return k6.Live{Requests: int64(float64(win.QPS) * (elapsed - 90*time.Second).Seconds())}, true
		}, ""},
		{"a silent API", func(*world, k6.Window, time.Duration) (k6.Live, bool) { return k6.Live{}, false }, ""},
		{"80 % of the rate for five minutes", func(w *world, win k6.Window, elapsed time.Duration) (k6.Live, bool) {
			n := float64(win.QPS) * elapsed.Seconds()
			if win.Variant == perfv1.VariantTreatment && elapsed > 10*time.Minute {
				n -= 0.2 * float64(win.QPS) * min(elapsed-10*time.Minute, 5*time.Minute).Seconds()
			}
			return k6.Live{Requests: int64(n)}, true
		}, "req/s between"},
		{"dropped iterations", func(w *world, win k6.Window, elapsed time.Duration) (k6.Live, bool) {
			l := k6.Live{Requests: int64(float64(win.QPS) * elapsed.Seconds())}
			if win.Variant == perfv1.VariantTreatment && elapsed > 10*time.Minute {
				l.Dropped = 40
			}
			return l, true
		}, "k6 dropped 40 iterations between"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := newWorld(t, seedExperiment())
			w.live = tc.live
			w.runToEnd()
			st := w.exp.Status
			if st.Phase != perfv1.PhaseSucceeded {
				t.Fatalf("phase %s, abort %+v", st.Phase, st.Abort)
			}
			for _, win := range st.Windows {
				if win.Variant != perfv1.VariantBaseline && win.Variant != perfv1.VariantTreatment {
					continue
				}
				flagged := strings.Join(win.Invalid, "; ")
				want := tc.want != "" && win.Variant == perfv1.VariantTreatment
				if want != (flagged != "") || (want && !strings.Contains(flagged, tc.want)) {
					t.Fatalf("stage %d %s window: invalid %q, want %q", win.Stage, win.Variant, flagged, tc.want)
				}
				if want && (len(win.Invalid) != 1 || *win.Valid) {
					t.Fatalf("flagged more than once, or still valid: %q", win.Invalid)
				}
			}
			if tc.want != "" && st.Verdict != perfv1.VerdictInconclusive {
				t.Fatalf("verdict %s on flagged windows", st.Verdict)
			}
		})
	}
}
