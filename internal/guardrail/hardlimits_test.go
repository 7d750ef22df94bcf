package guardrail

import (
	"math"
	"testing"
	"time"

	perfv1 "perfexp.dev/perf-operator/api/v1alpha1"
	"perfexp.dev/perf-operator/internal/metrics"
)

// step is one Observe call of a hard-limit case.
type step struct {
	pods    []PodState
	samples []metrics.Sample
	limit   float64
	reason  string // the breach wanted, "" for none
	message string // the message wanted, "" for any
}

func ws(pod string, t float64, bytes float64) metrics.Sample {
	return metrics.Sample{Time: at(t), Pod: pod, CPUCores: math.NaN(), WorkingSetBytes: bytes, HeapBytes: math.NaN()}
}

var (
	before = epoch.Add(-time.Hour) // a container started before the run
	during = epoch.Add(time.Hour)  // one started during it
)

func TestHardLimits(t *testing.T) {
	cases := []struct {
		name        string
		maxRestarts int32
		steps       []step
	}{
		{"an OOM kill before the run does not count, a new one does", 0, []step{
			{pods: []PodState{{Name: "a", Restarts: 2, OOMKilled: true, StartedAt: before}}},
			{pods: []PodState{{Name: "a", Restarts: 2, OOMKilled: true, StartedAt: before}}},
			{pods: []PodState{{Name: "a", Restarts: 3, OOMKilled: true, StartedAt: during}}, reason: perfv1.ReasonOOMKilled,
				message: "pod a: container was OOM-killed (restart count 3)"},
		}},
		{"an OOM kill seen as the current termination counts at once", 5, []step{
			{pods: []PodState{{Name: "a", Restarts: 0, StartedAt: before}}},
			{pods: []PodState{{Name: "a", Restarts: 0, OOMKilled: true}}, reason: perfv1.ReasonOOMKilled},
		}},
		{"a pod created during the run: its first OOM kill counts", 5, []step{
			{pods: []PodState{{Name: "a", StartedAt: before}}},
			{pods: []PodState{{Name: "a", StartedAt: before}, {Name: "b", Restarts: 1, OOMKilled: true, StartedAt: during}},
				reason: perfv1.ReasonOOMKilled, message: "pod b: container was OOM-killed (restart count 1)"},
		}},
		{"restarts before the run do not count, one after does", 0, []step{
			{pods: []PodState{{Name: "a", Restarts: 5, StartedAt: before}}},
			{pods: []PodState{{Name: "a", Restarts: 6, StartedAt: during}}, reason: perfv1.ReasonRestarts,
				message: "target containers restarted 1 time since the guardrails started (max 0): a 1"},
		}},
		{"restarts are summed over pods", 1, []step{
			{pods: []PodState{{Name: "a", StartedAt: before}, {Name: "b", StartedAt: before}}},
			{pods: []PodState{{Name: "a", Restarts: 1, StartedAt: during}, {Name: "b", StartedAt: before}}},
			{pods: []PodState{{Name: "a", Restarts: 1, StartedAt: during}, {Name: "b", Restarts: 1, StartedAt: during}},
				reason: perfv1.ReasonRestarts, message: "target containers restarted 2 times since the guardrails started (max 1): a 1, b 1"},
		}},
		{"a pod first seen during the run restarted before we saw it", 0, []step{
			{pods: []PodState{{Name: "a", StartedAt: before}}},
			{pods: []PodState{{Name: "b", Restarts: 1, StartedAt: during}}, reason: perfv1.ReasonRestarts},
		}},
		{"a pod missed at the start but running since before it", 0, []step{
			{pods: []PodState{{Name: "a", StartedAt: before}}},
			{pods: []PodState{{Name: "a", StartedAt: before}, {Name: "b", Restarts: 4, StartedAt: before}}},
		}},
		{"a restart count that goes back is a new pod; the old restarts stay", 1, []step{
			{pods: []PodState{{Name: "s-0", Restarts: 3, StartedAt: before}}},
			{pods: []PodState{{Name: "s-0", Restarts: 4, StartedAt: during}}},
			{pods: []PodState{{Name: "s-0", Restarts: 0, StartedAt: during.Add(time.Minute)}}},
			{pods: []PodState{{Name: "s-0", Restarts: 1, StartedAt: during.Add(2 * time.Minute)}}, reason: perfv1.ReasonRestarts},
		}},
		{"working set over the limit", 0, []step{
			{samples: []metrics.Sample{ws("a", 0, 0.9*limit)}, limit: limit},
			{samples: []metrics.Sample{ws("a", 15, 0.95*limit)}, limit: limit, reason: perfv1.ReasonMemoryLimit,
				message: "pod a: working set 11.4 GiB is 95% of the 12 GiB memory limit (max 90%)"},
		}},
		{"no limit known, or no working set", 0, []step{
			{samples: []metrics.Sample{ws("a", 0, 2*limit)}, limit: 0},
			{samples: []metrics.Sample{ws("a", 15, 2*limit)}, limit: math.NaN()},
			{samples: []metrics.Sample{ws("a", 30, math.NaN())}, limit: limit},
		}},
		{"an OOM kill comes before the memory limit", 0, []step{
			{pods: []PodState{{Name: "a", StartedAt: before}}},
			{pods: []PodState{{Name: "a", OOMKilled: true}}, samples: []metrics.Sample{ws("a", 15, 0.99*limit)}, limit: limit,
				reason: perfv1.ReasonOOMKilled},
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			cfg := defaultConfig()
			cfg.MaxRestarts = c.maxRestarts
			var st State
			for i, s := range c.steps {
				st = roundTrip(st)
				b := st.Observe(cfg, s.samples, s.pods, s.limit, at(float64(i)*15))
				switch {
				case s.reason == "" && b != nil:
					t.Fatalf("step %d: unexpected %s: %s", i, b.Reason, b.Message)
				case s.reason != "" && (b == nil || b.Reason != s.reason):
					t.Fatalf("step %d: got %+v, want %s", i, b, s.reason)
				case s.message != "" && b.Message != s.message:
					t.Fatalf("step %d: message\n got  %q\n want %q", i, b.Message, s.message)
				}
			}
		})
	}
}

// TestRecordStartsNothing: samples recorded before the toggle neither trip a
// rule nor start the restart count.
func TestRecordStartsNothing(t *testing.T) {
	cfg := defaultConfig()
	var st State
	st.Record(cfg, []metrics.Sample{ws("a", 0, 2*limit)}, []PodState{{Name: "a", Restarts: 1, StartedAt: before}}, at(0))
	st.Record(cfg, nil, []PodState{{Name: "a", Restarts: 2, StartedAt: before}}, at(15))
	if st.Start != 0 || st.Pods[0].Counted {
		t.Fatalf("Record started the run: %+v", st)
	}
	if b := st.Observe(cfg, nil, []PodState{{Name: "a", Restarts: 2, StartedAt: before}}, limit, at(30)); b != nil {
		t.Fatalf("restarts before the first Observe counted: %s", b.Message)
	}
}
