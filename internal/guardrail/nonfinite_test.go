package guardrail

import (
	"math"
	"testing"

	"perfexp.dev/perf-operator/internal/metrics"
)

// A metrics source that answers NaN, ±Inf or a negative number has measured
// nothing: no guardrail may act on it ("+Inf TiB" is not a memory limit breach),
// and it must not enter a pod's growth history.
func TestUnusableValuesTripNothing(t *testing.T) {
	for _, v := range []float64{math.Inf(1), math.Inf(-1), math.NaN(), -1e9} {
		cfg := defaultConfig()
		var st State
		for i := 0; i < 40; i++ {
			st = roundTrip(st)
			smp := metrics.Sample{Time: at(float64(i) * 15), Pod: "a", CPUCores: v, WorkingSetBytes: v, HeapBytes: v}
			if b := st.Observe(cfg, []metrics.Sample{smp}, nil, limit, smp.Time); b != nil {
				t.Fatalf("value %v: %s: %s", v, b.Reason, b.Message)
			}
		}
		for _, p := range st.Pods {
			if len(p.V) != 0 {
				t.Fatalf("value %v entered pod %s's history: %v", v, p.Name, p.V)
			}
		}
	}
}
