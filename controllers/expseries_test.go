package controllers

import (
	"bytes"
	"runtime"
	"strconv"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/common/expfmt"
	"k8s.io/apimachinery/pkg/types"
)

// The per-experiment series are served exactly as GaugeVecs with the same
// names, help and labels would serve them, in a fraction of their memory.
func TestExperimentSeriesServeWhatGaugeVecsWould(t *testing.T) {
	c := newExperimentSeries()
	toggle := prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "perfexp_toggle_applied",
		Help: "1 while the experiment's toggle is in effect on its target, else 0."}, []string{"namespace", "experiment"})
	latency := prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "perfexp_window_latency_seconds",
		Help: "Latency percentiles of the experiment's last closed window per stage and variant (from the k6 results)."},
		[]string{"namespace", "experiment", "stage", "variant", "quantile"})
	info := prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "perfexp_experiment_info",
		Help: "1 for every experiment, labelled with its phase, verdict and abort reason (empty unless it ended early)."},
		[]string{"namespace", "experiment", "phase", "verdict", "reason"})
	overhead := prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "perfexp_stage_overhead_ratio",
		Help: "Relative overhead (treatment - baseline) / baseline of a finished stage, as a fraction, " +
			"by metric (cpu, memory, p99) and bound (estimate, and the 95 % interval's low and high)."},
		[]string{"namespace", "experiment", "stage", "metric", "bound"})

	for i := 0; i < 3; i++ {
		for _, ns := range []string{"shop", "team-a"} {
			key := types.NamespacedName{Namespace: ns, Name: "exp-" + strconv.Itoa(i)}
			c.setToggle(key, i%2 == 0)
			toggle.WithLabelValues(ns, key.Name).Set(float64(1 - i%2))
			for s, stage := range []string{"0", "1"} {
				for _, v := range []string{"baseline", "treatment"} {
					for q, quantile := range []string{"0.5", "0.95", "0.99"} {
						val := float64(i+s+q) / 1000
						c.setLatency(key, stage, v, quantile, 1) // overwritten below
						c.setLatency(key, stage, v, quantile, val)
						latency.WithLabelValues(ns, key.Name, stage, v, quantile).Set(val)
					}
				}
			}
			c.setInfo(key, "Treatment", "", "")
			c.setInfo(key, "Aborted", "Inconclusive", "HeapGrowth")
			info.WithLabelValues(ns, key.Name, "Aborted", "Inconclusive", "HeapGrowth").Set(1)
			for _, m := range []string{"cpu", "p99"} {
				for b, bound := range []string{"estimate", "low", "high"} {
					c.setOverhead(key, "s0 500qps", m, bound, float64(b)/10)
					overhead.WithLabelValues(ns, key.Name, "s0 500qps", m, bound).Set(float64(b) / 10)
				}
			}
		}
	}
	gone := types.NamespacedName{Namespace: "shop", Name: "deleted"}
	c.setToggle(gone, true)
	c.setLatency(gone, "0", "baseline", "0.5", 1)
	c.setInfo(gone, "Succeeded", "Pass", "")
	c.forget(gone)

	text := func(cs ...prometheus.Collector) string {
		reg := prometheus.NewPedanticRegistry()
		reg.MustRegister(cs...)
		families, err := reg.Gather()
		if err != nil {
			t.Fatal(err)
		}
		var b bytes.Buffer
		for _, f := range families {
			if _, err := expfmt.MetricFamilyToText(&b, f); err != nil {
				t.Fatal(err)
			}
		}
		return b.String()
	}
	got, want := text(c), text(toggle, latency, info, overhead)
	if got != want {
		t.Fatalf("served\n%s\nwant\n%s", got, want)
	}
}

// What a thousand finished experiments' series keep in memory (a log line,
// not a bar: the heap's accounting moves a little with the runtime).
func TestExperimentSeriesMemory(t *testing.T) {
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	c := newExperimentSeries()
	for i := 0; i < 1000; i++ {
		key := types.NamespacedName{Namespace: "bench", Name: "app-" + strconv.Itoa(i)}
		c.setToggle(key, false)
		for _, v := range []string{"baseline", "treatment"} {
			for _, q := range []string{"0.5", "0.95", "0.99"} {
				c.setLatency(key, "0", v, q, 0.01)
			}
		}
		c.setInfo(key, "Succeeded", "Pass", "")
		for _, m := range []string{"cpu", "memory", "p99"} {
			for _, b := range []string{"estimate", "low", "high"} {
				c.setOverhead(key, "s0 10qps", m, b, 0.01)
			}
		}
	}
	runtime.GC()
	runtime.ReadMemStats(&after)
	t.Logf("1,000 experiments' 17 series each: %.1f MB", float64(int64(after.HeapAlloc)-int64(before.HeapAlloc))/(1<<20))
	runtime.KeepAlive(c)
}
