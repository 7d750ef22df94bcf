package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Phase is where an experiment is in its run.
// +kubebuilder:validation:Enum=Pending;WarmingUp;Baseline;Switching;Treatment;Reverting;Analyzing;Succeeded;Failed;Aborted
type Phase string

// The phases, in the order a run goes through them. Per stage the run goes
// Baseline → Switching (toggle applied, rollout, settle) → Treatment → Reverting
// (toggle reverted, rollout, settle) and on to the next stage's Baseline.
const (
	// PhasePending: accepted, preflight not passed yet (target missing or not
	// ready, no limits, target held by another experiment). Nothing has changed
	// on the target; the spec may still be edited.
	PhasePending Phase = "Pending"
	// PhaseWarmingUp: warm-up load is running; excluded from results.
	PhaseWarmingUp Phase = "WarmingUp"
	// PhaseBaseline: a baseline window is measured with the toggle off.
	PhaseBaseline Phase = "Baseline"
	// PhaseSwitching: the toggle is being applied, rolled out and settled, under load.
	PhaseSwitching Phase = "Switching"
	// PhaseTreatment: a treatment window is measured with the toggle on.
	PhaseTreatment Phase = "Treatment"
	// PhaseReverting: the toggle is being reverted, rolled out and settled.
	PhaseReverting Phase = "Reverting"
	// PhaseAnalyzing: all windows are measured; the summary is being computed.
	PhaseAnalyzing Phase = "Analyzing"
	// PhaseSucceeded: the run completed and the summary is final. Terminal.
	PhaseSucceeded Phase = "Succeeded"
	// PhaseFailed: the run could not complete (for example its load Job failed
	// repeatedly); the toggle is reverted. Terminal.
	PhaseFailed Phase = "Failed"
	// PhaseAborted: spec.abort or a guardrail stopped the run; the toggle is
	// reverted and status.abort says why. Terminal.
	PhaseAborted Phase = "Aborted"
)

// IsTerminal reports whether the phase is final: nothing more will run.
func (p Phase) IsTerminal() bool {
	return p == PhaseSucceeded || p == PhaseFailed || p == PhaseAborted
}

// Variant is the kind of a window.
// +kubebuilder:validation:Enum=warmup;baseline;settle;treatment;rounds
type Variant string

// The window variants. Only baseline and treatment windows enter the results.
const (
	VariantWarmup    Variant = "warmup"
	VariantBaseline  Variant = "baseline"
	VariantSettle    Variant = "settle"
	VariantTreatment Variant = "treatment"
	// VariantRounds is an interleaved stage's continuous load: its Job runs
	// every round's sub-windows and settle periods.
	VariantRounds Variant = "rounds"
)

// PerfExperimentStatus is what the operator observed and decided. Every deadline
// of the run is computed from the timestamps here, so an operator restarted at any
// moment carries on where it was.
type PerfExperimentStatus struct {
	// ObservedGeneration is the spec generation the status describes.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`

	// Phase is where the run is.
	// +optional
	Phase Phase `json:"phase,omitempty"`

	// CurrentStage is the stage being run, as "index/total (qps)", such as
	// "2/3 (1000qps)".
	// +optional
	CurrentStage string `json:"currentStage,omitempty"`

	// StageIndex is the zero-based index of the stage being run.
	// +optional
	StageIndex *int32 `json:"stageIndex,omitempty"`

	// VariantIndex is the zero-based index, in spec.variants, of the variant
	// being applied, measured or reverted, or whose closing baseline is being
	// measured (experiments with spec.variants).
	// +optional
	VariantIndex *int32 `json:"variantIndex,omitempty"`

	// Conditions follow the kstatus conventions (Ready, Reconciling, Stalled)
	// plus the domain conditions documented with their types.
	// +optional
	// +listType=map
	// +listMapKey=type
	// +patchStrategy=merge
	// +patchMergeKey=type
	Conditions []metav1.Condition `json:"conditions,omitempty" patchStrategy:"merge" patchMergeKey:"type"`

	// StartTime is when preflight passed and the run began.
	// +optional
	StartTime *metav1.Time `json:"startTime,omitempty"`

	// PhaseStartTime is when the current phase began.
	// +optional
	PhaseStartTime *metav1.Time `json:"phaseStartTime,omitempty"`

	// CompletionTime is when the run reached a terminal phase.
	// +optional
	CompletionTime *metav1.Time `json:"completionTime,omitempty"`

	// MetricsSource is the source in use, resolved from spec.metrics.source.
	// +optional
	MetricsSource MetricsSource `json:"metricsSource,omitempty"`

	// Measurement is the sampling state.
	// +optional
	Measurement *MeasurementStatus `json:"measurement,omitempty"`

	// Toggle records what the toggle changed and what must be restored.
	// +optional
	Toggle *ToggleStatus `json:"toggle,omitempty"`

	// Interleaving records the rounds of design interleaved: the seed and
	// every stage's round orders, fixed when the run starts.
	// +optional
	Interleaving *InterleavingStatus `json:"interleaving,omitempty"`

	// Windows are the measured and excluded windows, in run order.
	// +optional
	// +listType=atomic
	Windows []WindowStatus `json:"windows,omitempty"`

	// Summary is the overhead table, one row per stage.
	// +optional
	// +listType=atomic
	Summary []StageSummary `json:"summary,omitempty"`

	// Curve is the load curve, one point per stage from its baseline window:
	// what was asked and achieved, latency, errors and resources. It is written
	// when a run with several stages, or without a toggle, completes.
	// +optional
	// +listType=atomic
	Curve []CurvePoint `json:"curve,omitempty"`

	// Knee is the first stage past the target's capacity (spec.knee), when the
	// curve has one.
	// +optional
	Knee *KneeStatus `json:"knee,omitempty"`

	// Verdict is the experiment's outcome in one word.
	// +optional
	Verdict Verdict `json:"verdict,omitempty"`

	// Overhead is the largest relative overhead over all stages, for printing.
	// +optional
	Overhead *OverheadColumns `json:"overhead,omitempty"`

	// Abort says why the run was aborted, when it was.
	// +optional
	Abort *AbortStatus `json:"abort,omitempty"`
}

// InterleavingStatus is the schedule of an interleaved run.
type InterleavingStatus struct {
	// Seed drew the orders.
	Seed int64 `json:"seed"`
	// Rounds are every stage's rounds, in run order.
	// +optional
	// +listType=atomic
	Rounds []RoundStatus `json:"rounds,omitempty"`
}

// RoundStatus is one round of an interleaved stage.
type RoundStatus struct {
	// Stage is the stage's zero-based index.
	Stage int32 `json:"stage"`
	// Round is the round's zero-based index within its stage.
	Round int32 `json:"round"`
	// Order is "AB" (baseline first) or "BA".
	Order string `json:"order"`
}

// ToggleStatus records the toggle's state on the target. The same record is kept
// in an annotation on the Deployment before anything is changed, so the original
// can be restored even if this status is lost.
type ToggleStatus struct {
	// Applied is true while the toggle is in effect on the target.
	Applied bool `json:"applied"`

	// Original is the target's state before the toggle, as the toggle kind's JSON
	// record (for example the container's env entry, or its absence).
	// +optional
	Original string `json:"original,omitempty"`

	// AppliedAt is when the toggle was last applied.
	// +optional
	AppliedAt *metav1.Time `json:"appliedAt,omitempty"`

	// RevertedAt is when the toggle was last reverted.
	// +optional
	RevertedAt *metav1.Time `json:"revertedAt,omitempty"`

	// TargetGeneration is the Deployment's generation after the last toggle
	// change; its rollout counts as complete only once the Deployment controller
	// has observed that generation (a lagging cache cannot fake completion).
	// +optional
	TargetGeneration int64 `json:"targetGeneration,omitempty"`

	// Variant is the spec.variants name of the toggle last applied ("" for
	// spec.toggle): a runtime toggle's revert request is that variant's.
	// +optional
	Variant string `json:"variant,omitempty"`

	// Pods are the pods a runtime (http) toggle was applied to; each gets the
	// revert request.
	// +optional
	// +listType=set
	Pods []string `json:"pods,omitempty"`
}

// WindowStatus is one window of the run and what was measured in it.
type WindowStatus struct {
	// Stage is the stage's zero-based index; -1 for the warm-up.
	Stage int32 `json:"stage"`

	// QPS is the target arrival rate of the window (0 for closed-loop load).
	QPS int32 `json:"qps"`

	// Concurrency is the window's closed-loop virtual users (0 for an arrival rate).
	// +optional
	Concurrency int32 `json:"concurrency,omitempty"`

	// Variant is the kind of window.
	Variant Variant `json:"variant"`

	// Arm is the spec.variants name of a treatment window, of a settle
	// period after applying or reverting that variant, or of the baseline
	// measured after it, which closes its bracket (experiments with
	// spec.variants; a stage's first baseline has none).
	// +optional
	Arm string `json:"arm,omitempty"`

	// Round is the round of an interleaved stage's sub-window (zero-based).
	// +optional
	Round *int32 `json:"round,omitempty"`

	// Job is the k6 Job that loaded the window.
	// +optional
	Job string `json:"job,omitempty"`

	// Start is when the window's load started (its pods started), not when its
	// Job was created.
	// +optional
	Start *metav1.Time `json:"start,omitempty"`

	// End is when the window ended.
	// +optional
	End *metav1.Time `json:"end,omitempty"`

	// Load is what the load generator reported.
	// +optional
	Load *LoadResult `json:"load,omitempty"`

	// Resources are the target's resource aggregates over the window.
	// +optional
	Resources *ResourceAggregates `json:"resources,omitempty"`

	// Series are the target's samples over the window, summed over its pods. The
	// overhead's confidence interval is computed from them, so they are kept
	// (bounded), not only their means.
	// +optional
	Series *WindowSeries `json:"series,omitempty"`

	// LiveStart and LiveEnd are an interleaved sub-window's k6 counters,
	// summed over its load pods, first and last read inside it. When the
	// sub-window ends their difference becomes Load (requests, failures,
	// achieved rate and the percentiles of the requests in between) and they
	// are cleared. Internal.
	// +optional
	LiveStart *LiveCounters `json:"liveStart,omitempty"`
	// LiveEnd is the last reading (see LiveStart). Internal.
	// +optional
	LiveEnd *LiveCounters `json:"liveEnd,omitempty"`

	// Valid is false when the window must not be trusted; Invalid says why.
	// +optional
	Valid *bool `json:"valid,omitempty"`

	// Invalid lists why the window is not trusted, such as
	// "achieved 489.2 req/s, 2.2% below the target 500" or "dropped 31 iterations".
	// +optional
	// +listType=atomic
	Invalid []string `json:"invalid,omitempty"`
}

// LiveCounters are a load Job's k6 counters at one moment, summed over its pods.
type LiveCounters struct {
	// At is when they were read.
	At metav1.Time `json:"at"`
	// Requests is http_reqs so far.
	Requests int64 `json:"requests"`
	// Failed is how many of them failed so far.
	Failed int64 `json:"failed"`
	// Buckets are the latency histogram so far, as "index:count" pairs.
	// +optional
	Buckets string `json:"buckets,omitempty"`
}

// MaxSeriesPoints bounds a window's series: past it, adjacent points are
// averaged in pairs and the step doubles, so an experiment's status stays small
// whatever its windows' lengths.
const MaxSeriesPoints = 240

// WindowSeries are evenly spaced samples of the target, summed over its pods.
// Each metric is a PackedSeries (see PackSeries): `kubectl describe` prints one
// short line per metric instead of a number per line, and every reader (the
// engine's analysis, `kubectl perf report`, `plot` and `export`) decodes it
// with Values, so the analysis stays reproducible from the object alone.
type WindowSeries struct {
	// StepSeconds is the spacing of the points.
	StepSeconds int32 `json:"stepSeconds"`
	// Points is how many points each of cpu and memory holds.
	// +optional
	Points int32 `json:"points,omitempty"`
	// CPU is CPU use in millicores, packed.
	// +optional
	CPU PackedSeries `json:"cpu,omitempty"`
	// Memory is the working set in bytes, packed.
	// +optional
	Memory PackedSeries `json:"memory,omitempty"`
	// Heap is the heap in use in bytes, packed, when the target exports it
	// (then it has as many points as cpu).
	// +optional
	Heap PackedSeries `json:"heap,omitempty"`
	// GC is the time spent in garbage collection in microseconds per second,
	// summed over the pods, packed, when the target exports GC timing (then
	// it has as many points as cpu).
	// +optional
	GC PackedSeries `json:"gc,omitempty"`
	// Missing counts the sampling instants of the window without usable
	// numbers: a failed query, or an instant where a ready pod had no value or a
	// value that is NaN, infinite or negative. Such an instant is left out of
	// the series, never summed over the pods that answered.
	// +optional
	Missing int32 `json:"missing,omitempty"`
	// LeftOut counts the samples taken during the window but kept out of its
	// series on purpose: those of its first sampling interval (k6 starting up)
	// and those whose CPU averages over the window's start. They are not missing
	// metrics.
	// +optional
	LeftOut int32 `json:"leftOut,omitempty"`
}

// MeasurementStatus is the sampling state, kept so an operator restart resumes it.
type MeasurementStatus struct {
	// LastSampleTime is when the last persisted sample was taken.
	// +optional
	LastSampleTime *metav1.Time `json:"lastSampleTime,omitempty"`
	// Replicas is the target's replica count at the start; a change during a
	// window (an HPA) makes the window untrustworthy.
	Replicas int32 `json:"replicas"`
	// CPULimitCores is the target container's CPU limit, per pod.
	CPULimitCores float64 `json:"cpuLimitCores"`
	// MemoryLimitBytes is the target container's memory limit, per pod.
	MemoryLimitBytes int64 `json:"memoryLimitBytes"`
	// LastError is the last sampling error, while samples are failing.
	// +optional
	LastError string `json:"lastError,omitempty"`
	// Guard is the runaway-heap guardrail's state (its recent per-pod history),
	// as JSON. It is internal and bounded.
	// +optional
	Guard string `json:"guard,omitempty"`
}

// LoadResult is one window's k6 results. Latencies are exact percentiles of all the
// window's requests, never averages of percentiles.
type LoadResult struct {
	// Requests is the number of requests sent.
	Requests int64 `json:"requests"`
	// Failures is the number of failed requests.
	Failures int64 `json:"failures"`
	// DroppedIterations is the number of iterations k6 could not start in time.
	DroppedIterations int64 `json:"droppedIterations"`
	// AchievedQPS is requests per second over the window.
	AchievedQPS float64 `json:"achievedQPS"`
	// P50Ms is the median latency in milliseconds.
	P50Ms float64 `json:"p50Ms"`
	// P95Ms is the 95th percentile latency in milliseconds.
	P95Ms float64 `json:"p95Ms"`
	// P99Ms is the 99th percentile latency in milliseconds.
	P99Ms float64 `json:"p99Ms"`
}

// ResourceAggregates are a window's mean resource use, summed over target pods.
type ResourceAggregates struct {
	// Samples is the number of samples aggregated.
	Samples int32 `json:"samples"`
	// CPUCores is the mean CPU use in cores.
	CPUCores float64 `json:"cpuCores"`
	// CPUPercentOfLimit is the mean CPU use as a percentage of the CPU limit.
	// +optional
	CPUPercentOfLimit float64 `json:"cpuPercentOfLimit,omitempty"`
	// MemoryBytes is the mean working set in bytes.
	MemoryBytes int64 `json:"memoryBytes"`
	// MemoryPercentOfLimit is the mean working set as a percentage of the limit.
	// +optional
	MemoryPercentOfLimit float64 `json:"memoryPercentOfLimit,omitempty"`
	// HeapBytes is the mean heap in use, when the target exports it.
	// +optional
	HeapBytes *int64 `json:"heapBytes,omitempty"`
}

// StageSummary is one row of the overhead table.
type StageSummary struct {
	// Stage is the stage's name (its QPS unless named).
	Stage string `json:"stage"`
	// QPS is the stage's target rate (0 for a concurrency stage).
	QPS int32 `json:"qps"`
	// Concurrency is the stage's closed-loop virtual users (0 for a qps stage).
	// +optional
	Concurrency int32 `json:"concurrency,omitempty"`
	// Variant is the spec.variants name the row compares with the stage's
	// baseline (experiments with spec.variants: one row per stage and
	// variant).
	// +optional
	Variant string `json:"variant,omitempty"`
	// Confidence is the coverage of each interval in the row when it is not
	// 95 %: with several variants each interval is widened (Bonferroni,
	// 1 − 0.05 / variants) so that all of them hold together with 95 %.
	// +optional
	Confidence float64 `json:"confidence,omitempty"`
	// CPU compares CPU use in cores; the delta is also given in percentage points
	// of the limit.
	// +optional
	CPU *MetricComparison `json:"cpu,omitempty"`
	// Memory compares the working set in bytes.
	// +optional
	Memory *MetricComparison `json:"memory,omitempty"`
	// Heap compares heap bytes in use, when exported.
	// +optional
	Heap *MetricComparison `json:"heap,omitempty"`
	// GC compares the time spent in garbage collection, in seconds per
	// second over all pods (0.012 is 12 ms of GC each second), when the
	// target exports GC timing.
	// +optional
	GC *MetricComparison `json:"gc,omitempty"`
	// P50 compares median latency in milliseconds.
	// +optional
	P50 *MetricComparison `json:"p50,omitempty"`
	// P95 compares 95th percentile latency in milliseconds.
	// +optional
	P95 *MetricComparison `json:"p95,omitempty"`
	// P99 compares 99th percentile latency in milliseconds.
	// +optional
	P99 *MetricComparison `json:"p99,omitempty"`
	// Trustworthy is false when a window of the stage was invalid.
	Trustworthy bool `json:"trustworthy"`
	// Verdict is the stage's outcome.
	Verdict Verdict `json:"verdict"`
}

// CurvePoint is one stage of the load curve, measured with the toggle off.
type CurvePoint struct {
	// Stage is the stage's name.
	Stage string `json:"stage"`
	// QPS is the arrival rate the stage asked for (0 for a concurrency stage).
	// +optional
	QPS int32 `json:"qps,omitempty"`
	// Concurrency is the stage's closed-loop virtual users (0 for a qps stage).
	// +optional
	Concurrency int32 `json:"concurrency,omitempty"`
	// AchievedQPS is the rate of requests sent and answered.
	AchievedQPS float64 `json:"achievedQPS"`
	// P50Ms is the median latency in milliseconds.
	P50Ms float64 `json:"p50Ms"`
	// P95Ms is the 95th percentile latency in milliseconds.
	P95Ms float64 `json:"p95Ms"`
	// P99Ms is the 99th percentile latency in milliseconds.
	P99Ms float64 `json:"p99Ms"`
	// ErrorPercent is the share of failed requests, in percent.
	ErrorPercent float64 `json:"errorPercent"`
	// CPUCores is the target's mean CPU use over the window, all pods
	// together; absent when the window had no resource samples.
	// +optional
	CPUCores *float64 `json:"cpuCores,omitempty"`
	// CPUPercentOfLimit is CPUCores in percent of the pods' CPU limits.
	// +optional
	CPUPercentOfLimit *float64 `json:"cpuPercentOfLimit,omitempty"`
	// MemoryBytes is the target's mean working set over the window, all pods
	// together.
	// +optional
	MemoryBytes *int64 `json:"memoryBytes,omitempty"`
	// Valid is false when the window's load or samples cannot be trusted
	// (its invalid reasons are in status.windows). A stage past the knee is
	// usually invalid as a measurement of what it asked for: its load fell
	// short.
	Valid bool `json:"valid"`
}

// KneeStatus is where the target stopped keeping up with the load.
type KneeStatus struct {
	// Stage is the first stage past capacity.
	Stage string `json:"stage"`
	// Index is its zero-based position in spec.stages.
	Index int32 `json:"index"`
	// CapacityQPS is the highest rate achieved up to and including that stage:
	// the sweep's estimate of the target's capacity.
	CapacityQPS float64 `json:"capacityQPS"`
	// Reason says which rule placed the knee, with the numbers.
	Reason string `json:"reason"`
}

// MetricComparison is one metric before and after the toggle.
type MetricComparison struct {
	// Baseline is the value with the toggle off.
	Baseline float64 `json:"baseline"`
	// Treatment is the value with the toggle on.
	Treatment float64 `json:"treatment"`
	// Delta is treatment minus baseline, in the metric's unit.
	Delta float64 `json:"delta"`
	// DeltaPercentOfLimit is the delta in percentage points of the limit (CPU and
	// memory only).
	// +optional
	DeltaPercentOfLimit *float64 `json:"deltaPercentOfLimit,omitempty"`
	// Overhead is the relative change (treatment − baseline) / baseline, as a
	// fraction (0.041 is +4.1 %).
	Overhead float64 `json:"overhead"`
	// CILow is the lower bound of the confidence interval of Overhead (95 %,
	// or the row's confidence).
	CILow float64 `json:"ciLow"`
	// CIHigh is the upper bound of the confidence interval of Overhead.
	CIHigh float64 `json:"ciHigh"`
	// Significant is true when the interval excludes 0.
	Significant bool `json:"significant"`
	// Material is true when the overhead exceeds the success criterion.
	// +optional
	Material bool `json:"material,omitempty"`
	// MDE is the minimum detectable effect of this run: the overhead (as a
	// fraction) the same windows or rounds, with this run's noise, find
	// significant in 80 % of runs. An A/A run's MDE is its noise floor.
	// +optional
	MDE *float64 `json:"mde,omitempty"`
	// Rounds is how many rounds an interleaved stage's comparison used.
	// +optional
	Rounds int32 `json:"rounds,omitempty"`
}

// Verdict is an outcome in one word.
// +kubebuilder:validation:Enum=Pass;Fail;NoEffect;Inconclusive
type Verdict string

// The verdicts.
const (
	// VerdictPass: every criterion held (the overhead may be significant but is
	// within tolerance).
	VerdictPass Verdict = "Pass"
	// VerdictFail: some overhead exceeds its criterion.
	VerdictFail Verdict = "Fail"
	// VerdictNoEffect: no criteria were given and no CPU, memory or heap
	// overhead is significant (latency rows do not decide it).
	VerdictNoEffect Verdict = "NoEffect"
	// VerdictInconclusive: a window was invalid or the run was aborted.
	VerdictInconclusive Verdict = "Inconclusive"
)

// OverheadColumns are preformatted overheads for kubectl's printer columns.
type OverheadColumns struct {
	// CPU is the largest CPU overhead over all stages, such as "+4.1%".
	// +optional
	CPU string `json:"cpu,omitempty"`
	// Memory is the largest memory overhead over all stages.
	// +optional
	Memory string `json:"memory,omitempty"`
	// P99 is the largest p99 latency overhead over all stages.
	// +optional
	P99 string `json:"p99,omitempty"`
}

// AbortStatus says why and when a run was aborted.
type AbortStatus struct {
	// Reason is a CamelCase reason, the same as the Ready condition's.
	Reason string `json:"reason"`
	// Message explains the abort with numbers, such as
	// "heap +712 MiB/min, limit 100 MiB/min; projected to reach the limit in 9m".
	Message string `json:"message"`
	// At is when the abort was decided.
	At metav1.Time `json:"at"`
}
