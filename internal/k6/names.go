// Package k6 turns a PerfExperiment's load spec into k6 Jobs and their results
// back into a window's LoadResult. Everything here is pure: the reconciler creates
// what BuildJob and ScriptConfigMap return, reads each finished pod's termination
// message, and hands the parsed results to Combine.
//
// One ConfigMap holds run.js for every window of an experiment; a window's Job
// passes its rate, duration and virtual users in environment variables. Each k6
// pod writes a compact JSON summary, with a latency histogram, to its termination
// message, which the kubelet keeps in the pod's status: the results need no
// Prometheus and survive an operator restart.
package k6

import (
	"crypto/sha256"
	"encoding/hex"
	"strconv"
	"strings"
	"time"

	perfv1 "perfexp.dev/perf-operator/api/v1alpha1"
)

// Window is one load window.
type Window struct {
	// Stage is the zero-based stage index; -1 for the warm-up.
	Stage int32
	// Variant is warmup, baseline, settle or treatment.
	Variant perfv1.Variant
	// QPS is the target arrival rate of the whole window (all pods together),
	// or 0 when VUs is set.
	QPS int32
	// VUs is the closed-loop virtual users of the whole window (all pods
	// together), or 0 for an arrival rate.
	VUs int32
	// Duration is how long k6 runs.
	Duration time.Duration
	// ToggleOff marks a settle window that follows the toggle's revert (its load
	// is at the next stage's rate, before that stage's baseline); a settle window
	// without it follows applying the toggle. The two share a stage number, so the
	// name must tell them apart.
	ToggleOff bool
	// Arm is the spec.variants name of a treatment window, or of the settle
	// period after applying or reverting that variant; "" otherwise. Each
	// variant's windows of a stage get their own Job names.
	Arm string
}

// Pods is how many k6 pods run the window: the parallelism, but never more
// than its QPS or VUs (a pod runs at least 1 req/s, or one user).
func (w Window) Pods(parallelism int32) int32 { return min(parallelism, max(w.QPS, w.VUs)) }

// Labels the operator puts on k6 Jobs and pods, besides perfv1.LabelExperiment.
const (
	LabelStage     = "perfexp.dev/stage"
	LabelVariant   = "perfexp.dev/variant"
	LabelArm       = "perfexp.dev/arm"
	LabelManagedBy = "app.kubernetes.io/managed-by"
	ManagedBy      = "perf-operator"
	// StageWarmup is the stage label's value for the warm-up window.
	StageWarmup = "warmup"
)

// maxNameLength is the longest DNS-1123 label. Job names are held to it, not to
// the 253 of a subdomain, because the Job controller copies the name into a label
// of every pod, and label values stop at 63 characters.
const maxNameLength = 63

// JobName is the name of the window's k6 Job, such as
// "profiling-overhead-s1-treatment" or "profiling-overhead-warmup". It is
// deterministic, so a restarted operator finds the Job it created, and it differs
// between the windows of an experiment.
func JobName(experiment string, w Window) string {
	return boundedName(experiment, "-"+windowSuffix(w))
}

// ScriptConfigMapName is the name of the experiment's run.js ConfigMap, "<exp>-k6".
func ScriptConfigMapName(experiment string) string {
	return boundedName(experiment, "-k6")
}

// ExperimentLabelValue is the value of perfv1.LabelExperiment on the k6 Jobs and
// pods: the experiment's name, or its bounded form when the name is not a valid
// label value (longer than 63 characters). Select by this value, not by the name.
func ExperimentLabelValue(experiment string) string {
	if len(experiment) <= maxNameLength {
		return experiment
	}
	return boundedName(experiment, "")
}

func windowSuffix(w Window) string {
	if w.Variant == perfv1.VariantWarmup || w.Stage < 0 {
		return string(perfv1.VariantWarmup)
	}
	suffix := "s" + strconv.Itoa(int(w.Stage)) + "-" + string(w.Variant)
	if w.Variant == perfv1.VariantSettle {
		if w.ToggleOff {
			suffix += "-off"
		} else {
			suffix += "-on"
		}
	}
	if w.Arm != "" {
		suffix += "-" + w.Arm
	}
	return suffix
}

func stageLabel(w Window) string {
	if w.Variant == perfv1.VariantWarmup || w.Stage < 0 {
		return StageWarmup
	}
	return strconv.Itoa(int(w.Stage))
}

// boundedName joins prefix and suffix into a DNS-1123 label. When the prefix is
// too long, or is a subdomain with dots, it is shortened and followed by a hash of
// the whole original name: the suffix, which tells windows apart, stays readable,
// and two long names that share a beginning still get different results.
func boundedName(prefix, suffix string) string {
	name := prefix + suffix
	if len(name) <= maxNameLength && !strings.Contains(prefix, ".") {
		return name
	}
	sum := sha256.Sum256([]byte(name))
	hash := hex.EncodeToString(sum[:])[:8]
	keep := maxNameLength - len(suffix) - len(hash) - 1
	short := strings.ReplaceAll(prefix, ".", "-")
	if len(short) > keep {
		short = short[:keep]
	}
	short = strings.TrimRight(short, "-")
	return short + "-" + hash + suffix
}

// labels are the labels of a window's Job and its pods.
func labels(experiment string, w Window) map[string]string {
	l := map[string]string{
		perfv1.LabelExperiment: ExperimentLabelValue(experiment),
		LabelStage:             stageLabel(w),
		LabelVariant:           string(w.Variant),
		LabelManagedBy:         ManagedBy,
	}
	if w.Arm != "" {
		l[LabelArm] = w.Arm
	}
	return l
}
