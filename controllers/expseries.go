package controllers

import (
	"math"
	"sort"
	"sync"
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"google.golang.org/protobuf/proto"
	"k8s.io/apimachinery/pkg/types"
)

// experimentSeries holds the per-experiment series (perfexp_toggle_applied,
// perfexp_window_latency_seconds, perfexp_experiment_info and
// perfexp_stage_overhead_ratio) and serves them as one collector.
//
// A GaugeVec keeps about 780 bytes per series (the label values, five label
// pairs of their own, the metric and the map entry behind it): with the 17
// series of a finished experiment, 12.5 MB for a thousand of them, the largest
// share of the manager's live heap at N=1000 (docs/scale.md). Here a series is
// its value and a slice of shared label pairs: the namespace's pair is shared by
// every experiment of the namespace, the experiment's and its stages' by its
// own series, and the pairs of the fixed label values (variants, quantiles,
// metrics, bounds, phases, verdicts, reasons) by all. What is exposed is the
// same: the names, labels and values the GaugeVecs exposed.
type experimentSeries struct {
	toggle, latency, info, overhead *prometheus.Desc

	mu sync.Mutex
	m  map[types.NamespacedName]*expSeries
	// pairs interns label pairs: the fixed vocabularies and namespaces.
	pairs map[[2]string]*dto.LabelPair
}

// expSeries is one experiment's series.
type expSeries struct {
	ns, name *dto.LabelPair
	toggle   *gaugeSeries
	info     *gaugeSeries
	infoKey  [3]string
	latency  []*gaugeSeries
	overhead []*gaugeSeries
	// stages are the experiment's own stage label pairs.
	stages []*dto.LabelPair
}

// gaugeSeries is one series: a prometheus.Metric written from its value and
// its label pairs, sorted by name and never modified (the registry treats a
// written metric's labels as immutable, as client_golang's own gauges do).
type gaugeSeries struct {
	desc   *prometheus.Desc
	labels []*dto.LabelPair
	bits   atomic.Uint64
}

func (g *gaugeSeries) Desc() *prometheus.Desc { return g.desc }

func (g *gaugeSeries) Write(m *dto.Metric) error {
	m.Label = g.labels
	m.Gauge = &dto.Gauge{Value: proto.Float64(math.Float64frombits(g.bits.Load()))}
	return nil
}

func (g *gaugeSeries) set(v float64) { g.bits.Store(math.Float64bits(v)) }

// is reports whether the series has exactly these label pairs (by value).
func (g *gaugeSeries) is(labels []*dto.LabelPair) bool {
	if len(g.labels) != len(labels) {
		return false
	}
	for i := range labels {
		if g.labels[i].GetName() != labels[i].GetName() || g.labels[i].GetValue() != labels[i].GetValue() {
			return false
		}
	}
	return true
}

func newExperimentSeries() *experimentSeries {
	return &experimentSeries{
		toggle: prometheus.NewDesc("perfexp_toggle_applied",
			"1 while the experiment's toggle is in effect on its target, else 0.",
			[]string{"namespace", "experiment"}, nil),
		latency: prometheus.NewDesc("perfexp_window_latency_seconds",
			"Latency percentiles of the experiment's last closed window per stage and variant (from the k6 results).",
			[]string{"namespace", "experiment", "stage", "variant", "quantile"}, nil),
		info: prometheus.NewDesc("perfexp_experiment_info",
			"1 for every experiment, labelled with its phase, verdict and abort reason (empty unless it ended early).",
			[]string{"namespace", "experiment", "phase", "verdict", "reason"}, nil),
		overhead: prometheus.NewDesc("perfexp_stage_overhead_ratio",
			"Relative overhead (treatment - baseline) / baseline of a finished stage, as a fraction, "+
				"by metric (cpu, memory, p99) and bound (estimate, and the 95 % interval's low and high).",
			[]string{"namespace", "experiment", "stage", "metric", "bound"}, nil),
		m:     map[types.NamespacedName]*expSeries{},
		pairs: map[[2]string]*dto.LabelPair{},
	}
}

func (c *experimentSeries) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.toggle
	ch <- c.latency
	ch <- c.info
	ch <- c.overhead
}

func (c *experimentSeries) Collect(ch chan<- prometheus.Metric) {
	c.mu.Lock()
	var all []*gaugeSeries
	for _, e := range c.m {
		if e.toggle != nil {
			all = append(all, e.toggle)
		}
		if e.info != nil {
			all = append(all, e.info)
		}
		all = append(all, e.latency...)
		all = append(all, e.overhead...)
	}
	c.mu.Unlock()
	for _, g := range all {
		ch <- g
	}
}

// pair returns the shared label pair name=value; c.mu is held.
func (c *experimentSeries) pair(name, value string) *dto.LabelPair {
	k := [2]string{name, value}
	p := c.pairs[k]
	if p == nil {
		p = &dto.LabelPair{Name: proto.String(name), Value: proto.String(value)}
		c.pairs[k] = p
	}
	return p
}

// of returns key's series, created empty; c.mu is held.
func (c *experimentSeries) of(key types.NamespacedName) *expSeries {
	e := c.m[key]
	if e == nil {
		e = &expSeries{ns: c.pair("namespace", key.Namespace),
			name: &dto.LabelPair{Name: proto.String("experiment"), Value: proto.String(key.Name)}}
		c.m[key] = e
	}
	return e
}

// stage returns the experiment's own label pair stage=value.
func (e *expSeries) stage(value string) *dto.LabelPair {
	for _, p := range e.stages {
		if p.GetValue() == value {
			return p
		}
	}
	p := &dto.LabelPair{Name: proto.String("stage"), Value: proto.String(value)}
	e.stages = append(e.stages, p)
	return p
}

func sortedLabels(pairs ...*dto.LabelPair) []*dto.LabelPair {
	sort.Slice(pairs, func(i, j int) bool { return pairs[i].GetName() < pairs[j].GetName() })
	return pairs
}

// upsert sets the series of list with these labels to v, adding it if new.
func upsert(list []*gaugeSeries, desc *prometheus.Desc, labels []*dto.LabelPair, v float64) []*gaugeSeries {
	for _, g := range list {
		if g.is(labels) {
			g.set(v)
			return list
		}
	}
	g := &gaugeSeries{desc: desc, labels: labels}
	g.set(v)
	return append(list, g)
}

// setToggle sets perfexp_toggle_applied{namespace,experiment}.
func (c *experimentSeries) setToggle(key types.NamespacedName, applied bool) {
	v := 0.0
	if applied {
		v = 1
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	e := c.of(key)
	if e.toggle == nil {
		e.toggle = &gaugeSeries{desc: c.toggle, labels: sortedLabels(e.ns, e.name)}
	}
	e.toggle.set(v)
}

// setLatency sets perfexp_window_latency_seconds{namespace,experiment,stage,variant,quantile}.
func (c *experimentSeries) setLatency(key types.NamespacedName, stage, variant, quantile string, v float64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e := c.of(key)
	labels := sortedLabels(e.ns, e.name, e.stage(stage), c.pair("variant", variant), c.pair("quantile", quantile))
	e.latency = upsert(e.latency, c.latency, labels, v)
}

// setOverhead sets perfexp_stage_overhead_ratio{namespace,experiment,stage,metric,bound}.
func (c *experimentSeries) setOverhead(key types.NamespacedName, stage, metric, bound string, v float64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e := c.of(key)
	labels := sortedLabels(e.ns, e.name, e.stage(stage), c.pair("metric", metric), c.pair("bound", bound))
	e.overhead = upsert(e.overhead, c.overhead, labels, v)
}

// setInfo replaces perfexp_experiment_info{namespace,experiment,phase,verdict,reason}
// when its labels change: one series at a time, never none while rewritten.
func (c *experimentSeries) setInfo(key types.NamespacedName, phase, verdict, reason string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e := c.of(key)
	k := [3]string{phase, verdict, reason}
	if e.info != nil && e.infoKey == k {
		return
	}
	g := &gaugeSeries{desc: c.info, labels: sortedLabels(e.ns, e.name,
		c.pair("phase", phase), c.pair("verdict", verdict), c.pair("reason", reason))}
	g.set(1)
	e.info, e.infoKey = g, k
}

// forget drops every series of the experiment (it was deleted).
func (c *experimentSeries) forget(key types.NamespacedName) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.m, key)
}
