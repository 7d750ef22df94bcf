package engine

import (
	"encoding/json"
	"math"
	"sort"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	perfv1 "perfexp.dev/perf-operator/api/v1alpha1"
	"perfexp.dev/perf-operator/internal/guardrail"
	"perfexp.dev/perf-operator/internal/metrics"
)

// Sampling runs from the first baseline to the last revert: windows need series
// and, from the first toggle on, guardrails need every sample.
func samplingPhase(p perfv1.Phase) bool {
	switch p {
	case perfv1.PhaseBaseline, perfv1.PhaseSwitching, perfv1.PhaseTreatment, perfv1.PhaseReverting:
		return true
	}
	return false
}

// SampleDue reports whether the reconciler should take a sample now: the
// experiment is in a sampling phase and an interval has passed since the last
// sample, persisted or pending (last; zero when none is pending).
func SampleDue(exp *perfv1.PerfExperiment, last time.Time, now time.Time) bool {
	next, ok := NextSample(exp, last)
	return ok && !now.Before(next)
}

// NextSample is when the experiment's next sample is due (the zero time: at
// once); ok is false when it takes none (not sampling, being deleted, or no
// usable interval).
func NextSample(exp *perfv1.PerfExperiment, last time.Time) (time.Time, bool) {
	if !samplingPhase(exp.Status.Phase) || !exp.DeletionTimestamp.IsZero() {
		return time.Time{}, false
	}
	return nextSample(&exp.Spec, &exp.Status, last)
}

// nextSample is when the next sample is due: an interval after the newest one,
// persisted in st or pending (last, zero when none is), and at once (the zero
// time) when none was taken yet. ok is false when the interval is unusable.
func nextSample(spec *perfv1.PerfExperimentSpec, st *perfv1.PerfExperimentStatus, last time.Time) (time.Time, bool) {
	interval, err := spec.Metrics.Interval.Parse()
	if err != nil || interval <= 0 {
		return time.Time{}, false
	}
	if m := st.Measurement; m != nil && m.LastSampleTime != nil && m.LastSampleTime.After(last) {
		last = m.LastSampleTime.Time
	}
	if last.IsZero() {
		return time.Time{}, true
	}
	return last.Add(interval), true
}

// startMeasurement records, at the start, what utilisation is measured against.
func (x *decider) startMeasurement() {
	t := x.obs.Target
	x.st.Measurement = &perfv1.MeasurementStatus{
		Replicas: t.Replicas, CPULimitCores: t.CPULimitCores, MemoryLimitBytes: int64(t.MemoryLimitBytes),
	}
}

// measureSamples folds the samples taken since the last persisted status into the
// open window's series and, from the first toggle on, into the guardrails. It
// returns false when a guardrail ended the run. The same samples applied to the
// same persisted status always give the same result, so the reconciler may keep
// samples in memory for a while and pass them again (its writes are batched).
func (x *decider) measureSamples() bool {
	m := x.st.Measurement
	if m == nil {
		return true // started by an operator version without measurement
	}
	for _, f := range x.obs.SampleFailures {
		if w := x.windowAt(f.Time); w != nil {
			x.series(w).Missing++
		}
		m.LastError = f.Message
		x.advanceSampleTime(f.Time)
	}
	// The open window's start is known from its Job before its first sample is
	// placed; otherwise samples taken after the start but folded in before it
	// was recorded would be dropped.
	var w *perfv1.WindowStatus
	if x.spec.Interleaved() {
		w = x.roundsRecord(x.stage())
	} else {
		w = x.openMeasured()
	}
	if w != nil && w.Start == nil && w.End == nil {
		if job := x.obs.Jobs[w.Job]; job != nil && job.Started != nil {
			t := metav1Time(*job.Started)
			w.Start = &t
		}
	}
	for _, group := range byInstant(x.obs.Samples) {
		t := group[0].Time
		if m.LastSampleTime != nil && !t.After(m.LastSampleTime.Time) {
			continue // already persisted
		}
		// An instant with a pod missing or a value that is not a finite,
		// non-negative number is missing as a whole: summed, it would read as
		// less use than there was.
		first := m.LastSampleTime == nil
		problem := metrics.Problem(group)
		m.LastError = problem
		x.advanceSampleTime(t)
		if first && x.windowsTooShort(group) {
			return false
		}
		// A point belongs to a window only when the period its CPU is averaged
		// over lies wholly inside the window after its first sampling interval.
		// Before that it still carries the load (and toggle state) of what came
		// before the window, or k6 starting up: the window starts when its pods'
		// containers start, and k6 needs a moment (seconds on a busy node) before
		// its first request.
		if w := x.windowAt(t); w != nil && w.Start != nil && !t.Before(w.Start.Time) {
			switch {
			case averagedSince(group).Before(w.Start.Add(x.leadIn())):
				x.series(w).LeftOut++
			case problem != "":
				x.series(w).Missing++
			default:
				x.addPoint(w, group)
			}
		}
		// Before the first toggle the samples only teach the guardrail each
		// pod's healthy sawtooth; from the first toggle on every sample is judged.
		// A load-only sweep is judged from its first sample (the memory limit,
		// OOM kills and restarts; the growth rule is off: the heap follows the
		// load). The guardrails judge each pod on its own, so the usable values
		// of an incomplete instant still count; unusable ones are never acted on.
		observe := !x.spec.HasToggle() || x.toggleEverApplied()
		if b := x.guard(metrics.FiniteAll(group), t, observe); b != nil {
			x.finish(perfv1.PhaseAborted, b.Reason, b.Message)
			return false
		}
	}
	return true
}

// windowsTooShort ends the run at its first sample, before the toggle was
// ever applied, when the metrics source's answer shows that its windows cannot
// keep the samples their analysis needs (perfv1.WindowsKeepSamples):
// metrics-server averages each sample over its own resolution, which admission
// cannot know. Without this the run would go on for its whole length and end
// AnalysisIncomplete. Only the first sample decides: a later answer spanning a
// missed scrape reports a window twice as long, which says nothing about the
// source's resolution, and must not end a run that was keeping its samples.
func (x *decider) windowsTooShort(group []metrics.Sample) bool {
	if x.stage() != 0 || x.toggleEverApplied() {
		return false
	}
	errs := x.spec.WindowsKeepSamples(x.interval(), group[0].Time.Sub(averagedSince(group)))
	if len(errs) == 0 {
		return false
	}
	x.finish(perfv1.PhaseFailed, perfv1.ReasonInvalidSpec, errs.ToAggregate().Error()+"; nothing was changed")
	return true
}

func (x *decider) advanceSampleTime(t time.Time) {
	m := x.st.Measurement
	if m.LastSampleTime == nil || t.After(m.LastSampleTime.Time) {
		mt := metav1.NewTime(t)
		m.LastSampleTime = &mt
	}
}

// guard feeds one instant's samples to the guardrails, from the persisted state:
// Record before the first toggle, Observe (and judge) after it.
func (x *decider) guard(group []metrics.Sample, t time.Time, observe bool) *guardrail.Breach {
	cfg, err := guardrail.ConfigFrom(x.spec)
	if err != nil {
		return nil // validated at admission; an unparsable spec stalls in preflight
	}
	var b *guardrail.Breach
	x.withGuard(func(state *guardrail.State) {
		if observe {
			b = state.Observe(cfg, group, x.obs.Pods, float64(x.st.Measurement.MemoryLimitBytes), t)
		} else {
			state.Record(cfg, group, x.obs.Pods, t)
		}
	})
	return b
}

// withGuard runs f on the guardrail state kept in status. The state is
// decoded once per decision and encoded back once, at its end (storeGuard):
// a reconcile folds every sample still pending into it, and decoding and
// encoding it at each was 5 % of the operator's allocations at N=1000
// (docs/scale.md).
func (x *decider) withGuard(f func(*guardrail.State)) {
	m := x.st.Measurement
	if m == nil {
		return
	}
	if x.guardOf != m {
		x.storeGuard()
		x.guardState, x.guardOf = &guardrail.State{}, m
		if m.Guard != "" {
			_ = json.Unmarshal([]byte(m.Guard), x.guardState) // a corrupt state restarts the history
		}
	}
	f(x.guardState)
}

// storeGuard encodes the decoded guardrail state back into its measurement.
func (x *decider) storeGuard() {
	if x.guardOf == nil {
		return
	}
	if raw, err := json.Marshal(x.guardState); err == nil {
		x.guardOf.Guard = string(raw)
	}
	x.guardState, x.guardOf = nil, nil
}

// resetGuard forgets the pods' growth histories when a new stage's load rate
// begins: a new request rate is a new allocation rate. Restart counts stay.
func (x *decider) resetGuard() {
	x.withGuard(func(s *guardrail.State) { s.Reset() })
}

// windowAt is the open measured window a sample taken at t belongs to: the
// open baseline or treatment window, or in an interleaved stage the
// sub-window t falls in (none during its settle periods).
func (x *decider) windowAt(t time.Time) *perfv1.WindowStatus {
	if x.spec.Interleaved() {
		if w := x.sampleInterleaved(t); w != nil && w.End == nil {
			return w
		}
		return nil
	}
	return x.openMeasured()
}

// leadIn is how long after a window's start its samples are still left out.
// A window with its own load Job leaves out its first sampling interval (k6
// starting up); a sub-window of an interleaved stage follows its settle
// period under running load, so only samples averaged over its start are.
func (x *decider) leadIn() time.Duration {
	if x.spec.Interleaved() {
		return 0
	}
	return x.interval()
}

// openMeasured is the open baseline or treatment window, if any.
func (x *decider) openMeasured() *perfv1.WindowStatus {
	if w := x.openRecord(perfv1.VariantBaseline); w != nil {
		return w
	}
	return x.openRecord(perfv1.VariantTreatment)
}

func (x *decider) series(w *perfv1.WindowStatus) *perfv1.WindowSeries {
	if w.Series == nil {
		interval, _ := x.spec.Metrics.Interval.Parse()
		w.Series = &perfv1.WindowSeries{StepSeconds: int32(math.Max(1, interval.Seconds()))}
	}
	return w.Series
}

// addPoint appends one complete instant (see metrics.Problem), summed over the
// pods, to the window's series and keeps the series bounded by halving its
// resolution when it grows too long. The heap is summed only when every pod
// has it.
func (x *decider) addPoint(w *perfv1.WindowStatus, group []metrics.Sample) {
	s := x.series(w)
	var cpu, mem, heap, gc float64
	heapKnown, gcKnown := true, true
	for _, smp := range group {
		cpu += smp.CPUCores
		mem += smp.WorkingSetBytes
		if math.IsNaN(smp.HeapBytes) {
			heapKnown = false
		}
		heap += smp.HeapBytes
		if math.IsNaN(smp.GCSecondsPerSecond) {
			gcKnown = false
		}
		gc += smp.GCSecondsPerSecond
	}
	// The series are packed in the status; a series that does not unpack
	// (edited by hand) starts again rather than stopping the run.
	v, _ := s.Values()
	heapAligned := len(v.HeapBytes) == len(v.CPUMillicores)
	if s.Heap == "" {
		heapAligned = len(v.CPUMillicores) == 0
	}
	gcAligned := len(v.GCMicrosPerSecond) == len(v.CPUMillicores)
	if s.GC == "" {
		gcAligned = len(v.CPUMillicores) == 0
	}
	v.CPUMillicores = append(v.CPUMillicores, int64(math.Round(cpu*1000)))
	v.MemoryBytes = append(v.MemoryBytes, int64(mem))
	if heapKnown && heapAligned {
		v.HeapBytes = append(v.HeapBytes, int64(heap))
	} else {
		v.HeapBytes = nil
	}
	if gcKnown && gcAligned {
		v.GCMicrosPerSecond = append(v.GCMicrosPerSecond, int64(math.Round(gc*1e6)))
	} else {
		v.GCMicrosPerSecond = nil
	}
	if len(v.CPUMillicores) > perfv1.MaxSeriesPoints {
		v.CPUMillicores = halve(v.CPUMillicores)
		v.MemoryBytes = halve(v.MemoryBytes)
		v.HeapBytes = halve(v.HeapBytes)
		v.GCMicrosPerSecond = halve(v.GCMicrosPerSecond)
		s.StepSeconds *= 2
	}
	s.SetValues(v)
}

// halve averages adjacent pairs (an odd last point stays on its own).
func halve(v []int64) []int64 {
	out := make([]int64, 0, (len(v)+1)/2)
	for i := 0; i < len(v); i += 2 {
		if i+1 < len(v) {
			out = append(out, (v[i]+v[i+1])/2)
		} else {
			out = append(out, v[i])
		}
	}
	return out
}

// interval is the sampling interval (spec.metrics.interval, defaulted).
func (x *decider) interval() time.Duration {
	d, err := x.spec.Metrics.Interval.Parse()
	if err != nil || d <= 0 {
		d, _ = perfv1.DefaultMetricsInterval.Parse()
	}
	return d
}

// averagedSince is the start of the period an instant's CPU values average
// over (its time, for instantaneous values).
func averagedSince(group []metrics.Sample) time.Time {
	var window time.Duration
	for _, s := range group {
		window = max(window, s.Window)
	}
	return group[0].Time.Add(-window)
}

// byInstant groups samples taken at the same moment (one per pod), oldest first.
func byInstant(samples []metrics.Sample) [][]metrics.Sample {
	sorted := append([]metrics.Sample(nil), samples...)
	sort.SliceStable(sorted, func(i, k int) bool { return sorted[i].Time.Before(sorted[k].Time) })
	var out [][]metrics.Sample
	for _, s := range sorted {
		if n := len(out); n > 0 && out[n-1][0].Time.Equal(s.Time) {
			out[n-1] = append(out[n-1], s)
			continue
		}
		out = append(out, []metrics.Sample{s})
	}
	return out
}

// wakeForSample asks to be woken when the next sample is due.
func (x *decider) wakeForSample() {
	if !samplingPhase(x.st.Phase) || x.st.Measurement == nil {
		return
	}
	if next, ok := nextSample(x.spec, x.st, x.obs.LastPendingSample); ok {
		x.wakeAt(next) // a time already past wakes at once
	}
}
