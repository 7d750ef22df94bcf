package engine

import (
	"fmt"
	"time"

	perfv1 "perfexp.dev/perf-operator/api/v1alpha1"
	"perfexp.dev/perf-operator/internal/k6"
)

// Timing constants. They bound waits that no event may end; none of them is a
// polling interval.
const (
	// JobGrace is how long after a window's planned end the engine looks again if
	// no Job event arrived; the Job's own activeDeadlineSeconds ends it anyway.
	JobGrace = 2 * time.Minute
	// CacheLag is how soon the engine looks again for a Job it created but does
	// not observe yet (informer caches lag behind writes).
	CacheLag = 5 * time.Second
	// MissingJobTimeout is how long a created Job may stay unobserved before it
	// is created again (it never started, so no window runs twice).
	MissingJobTimeout = time.Minute
	// DefaultRolloutTimeout applies when neither the spec nor the Deployment
	// gives one (Kubernetes' own default progressDeadlineSeconds).
	DefaultRolloutTimeout = 10 * time.Minute
	// DefaultRevertTimeout applies to an experiment stored before
	// spec.guardrails.revertTimeout existed.
	DefaultRevertTimeout = 2 * time.Minute
	// RevertRetryMax bounds the backoff between attempts of a failing revert (or
	// any failing action), so a recovered endpoint is retried within it.
	RevertRetryMax = 15 * time.Second
	// Overdue is how long past its planned end a load Job may still run before
	// the run fails; the Job's own activeDeadlineSeconds normally ends it sooner.
	Overdue = 15 * time.Minute
	// settleSlack keeps a settle Job running a little past the settle period, so
	// load never stops before the engine moves on.
	settleSlack = time.Minute
)

// plan is the spec's timing, parsed once per decision. The spec was validated at
// admission; a value that still fails to parse stalls the run in preflight.
type plan struct {
	warmup, baseline, treatment, settle, rolloutTimeout, revertTimeout time.Duration
}

func newPlan(spec *perfv1.PerfExperimentSpec, target *Target) (plan, error) {
	var p plan
	var err error
	parse := func(field string, d perfv1.Duration) time.Duration {
		v, e := d.Parse()
		if e != nil && err == nil {
			err = fmt.Errorf("%s: %w", field, e)
		}
		return v
	}
	if spec.Warmup != nil {
		p.warmup = parse("spec.warmup.duration", spec.Warmup.Duration)
	}
	p.baseline = parse("spec.windows.baseline", spec.Windows.Baseline)
	p.treatment = parse("spec.windows.treatment", spec.Windows.Treatment)
	p.settle = parse("spec.windows.settle", spec.Windows.Settle)
	p.rolloutTimeout = parse("spec.guardrails.rolloutTimeout", spec.Guardrails.RolloutTimeout)
	p.revertTimeout = parse("spec.guardrails.revertTimeout", spec.Guardrails.RevertTimeout)
	if p.revertTimeout == 0 {
		p.revertTimeout = DefaultRevertTimeout
	}
	if p.rolloutTimeout == 0 {
		p.rolloutTimeout = DefaultRolloutTimeout
		if target != nil && target.Rollout.ProgressDeadline > 0 {
			p.rolloutTimeout = target.Rollout.ProgressDeadline
		}
	}
	return p, err
}

// measured returns the load window of a measured (or warm-up) variant.
func (p plan) measured(spec *perfv1.PerfExperimentSpec, stage int32, v perfv1.Variant) k6.Window {
	switch v {
	case perfv1.VariantWarmup:
		return k6.Window{Stage: -1, Variant: v, QPS: spec.Warmup.QPS, Duration: p.warmup}
	case perfv1.VariantBaseline:
		return stageWindow(spec, stage, v, p.baseline)
	default:
		return stageWindow(spec, stage, v, p.treatment)
	}
}

// stageWindow is a window of variant v at stage's load: its arrival rate or
// its closed-loop virtual users.
func stageWindow(spec *perfv1.PerfExperimentSpec, stage int32, v perfv1.Variant, d time.Duration) k6.Window {
	st := spec.Stages[stage]
	return k6.Window{Stage: stage, Variant: v, QPS: st.QPS, VUs: st.Concurrency, Duration: d}
}

// settleWindow is the load that runs while a toggle change rolls out and settles:
// after applying it (at the stage's rate) or after reverting it (at the next
// stage's rate, toggleOff).
// It lasts long enough for the longest allowed rollout plus the settle period;
// the engine deletes it as soon as the settle period is over.
func (p plan) settleWindow(spec *perfv1.PerfExperimentSpec, stage int32, toggleOff bool, arm string) k6.Window {
	d := p.settle + settleSlack
	if spec.Switch().RollsPods() {
		d += p.rolloutTimeout
	}
	w := stageWindow(spec, stage, perfv1.VariantSettle, d)
	w.ToggleOff, w.Arm = toggleOff, arm
	return w
}

// needsSettle reports whether a toggle change is followed by a settle period.
// Runtime toggles with settle 0s go straight to the next window.
func (p plan) needsSettle(spec *perfv1.PerfExperimentSpec) bool {
	return spec.Switch().RollsPods() || p.settle > 0
}

// stageLabel is the printer column's "2/3 (1000qps)" or "2/3 (10 VUs)", and
// "2/3 (1000qps) serial" while a variant is applied, measured or reverted.
func stageLabel(spec *perfv1.PerfExperimentSpec, stage int32, variant string) string {
	if stage < 0 {
		return fmt.Sprintf("warm-up (%dqps)", spec.Warmup.QPS)
	}
	label := fmt.Sprintf("%d/%d (%s)", stage+1, len(spec.Stages), spec.Stages[stage].LoadLabel())
	if variant != "" {
		label += " " + variant
	}
	return label
}
