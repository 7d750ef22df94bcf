package v1alpha1

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/api/resource"
)

// The defaults. They are also written as +kubebuilder:default markers, because the
// apiserver applies those at admission; Default applies the same values in Go for
// objects that never went through an apiserver (the kubectl-perf plugin reads
// manifests offline). A test compares both against a real apiserver.
const (
	DefaultBaseline           Duration   = "30m"
	DefaultTreatment          Duration   = "30m"
	DefaultSettle             Duration   = "2m"
	DefaultMetricsInterval    Duration   = "15s"
	DefaultLoadTimeout        Duration   = "10s"
	DefaultHTTPToggleTimeout  Duration   = "5s"
	DefaultExecToggleTimeout  Duration   = "30s"
	DefaultK6Image                       = "grafana/k6:1.8.1"
	DefaultK6Parallelism      int32      = 1
	DefaultErrorRate          Percent    = "5%"
	DefaultMaxUtilization     Percent    = "90%"
	DefaultMaxGrowthPerMinute            = "100Mi"
	DefaultConsecutive        int32      = 3
	DefaultScriptKey                     = "script.js"
	DefaultJobsPolicy         JobsPolicy = JobsPolicyDelete
	DefaultRevertTimeout      Duration   = "2m"
	DefaultDesign             Design     = DesignSequential
	DefaultRounds             int32      = 4
	DefaultOrder              Order      = OrderABBA
	DefaultKneeShortfall      Percent    = "10%"
	DefaultKneeP99Factor      int32      = 3
)

// Default fills every unset field that has a default, exactly as the CRD's
// defaulting does. It never overwrites a set field.
func (in *PerfExperiment) Default() {
	s := &in.Spec
	setDuration(&s.Windows.Baseline, DefaultBaseline)
	setDuration(&s.Windows.Treatment, DefaultTreatment)
	setDuration(&s.Windows.Settle, DefaultSettle)
	if s.Design == "" {
		s.Design = DefaultDesign
	}
	if il := s.Interleaving; il != nil {
		if il.Rounds == 0 {
			il.Rounds = DefaultRounds
		}
		if il.Order == "" {
			il.Order = DefaultOrder
		}
	}
	if s.Metrics.Source == "" {
		s.Metrics.Source = MetricsSourceAuto
	}
	setDuration(&s.Metrics.Interval, DefaultMetricsInterval)
	setDuration(&s.Load.Timeout, DefaultLoadTimeout)
	if s.Load.K6.Image == "" {
		s.Load.K6.Image = DefaultK6Image
	}
	if s.Load.K6.Parallelism == 0 {
		s.Load.K6.Parallelism = DefaultK6Parallelism
	}
	for i := range s.Load.Requests {
		r := &s.Load.Requests[i]
		if r.Method == "" {
			r.Method = "GET"
		}
		if r.Weight == 0 {
			r.Weight = 1
		}
	}
	if s.Load.ScriptRef != nil && s.Load.ScriptRef.Key == "" {
		s.Load.ScriptRef.Key = DefaultScriptKey
	}
	if t := s.Toggle; t != nil {
		defaultToggle(t)
	}
	for i := range s.Variants {
		defaultToggle(&s.Variants[i].Toggle)
	}
	if s.Knee.RateShortfall == "" {
		s.Knee.RateShortfall = DefaultKneeShortfall
	}
	if s.Knee.P99Factor == 0 {
		s.Knee.P99Factor = DefaultKneeP99Factor
	}
	g := &s.Guardrails
	setDuration(&g.RevertTimeout, DefaultRevertTimeout)
	if g.ErrorRate == "" {
		g.ErrorRate = DefaultErrorRate
	}
	if g.Heap.MaxGrowthPerMinute == nil {
		q := resource.MustParse(DefaultMaxGrowthPerMinute)
		g.Heap.MaxGrowthPerMinute = &q
	}
	if g.Heap.MaxUtilization == "" {
		g.Heap.MaxUtilization = DefaultMaxUtilization
	}
	if g.Heap.ConsecutiveBreaches == 0 {
		g.Heap.ConsecutiveBreaches = DefaultConsecutive
	}
	if s.Cleanup.Jobs == "" {
		s.Cleanup.Jobs = DefaultJobsPolicy
	}
}

func defaultToggle(t *ToggleSpec) {
	if h := t.HTTP; h != nil {
		if h.Method == "" {
			h.Method = "POST"
		}
		if h.Revert.Method == "" {
			h.Revert.Method = "POST"
		}
		if h.Scheme == "" {
			h.Scheme = "http"
		}
		setDuration(&h.Timeout, DefaultHTTPToggleTimeout)
	}
	if e := t.Exec; e != nil {
		setDuration(&e.Timeout, DefaultExecToggleTimeout)
	}
	if t.OnRevertFailure == "" {
		t.OnRevertFailure = RevertFailureRestartPods
	}
}

func setDuration(d *Duration, def Duration) {
	if *d == "" {
		*d = def
	}
}

// The formats of Duration and Percent, the same regular expressions as the CRD's
// XValidation markers on those types, so Go accepts exactly what admission does.
// Go's own parsers are looser: time.ParseDuration takes "0", "+5m", "-0s", ".5s"
// and "1µs", and strconv.ParseFloat takes "NaN", "1_0" and "0x1p1".
var (
	durationFormat = regexp.MustCompile(`^([0-9]{1,6}([.][0-9]+)?(ns|us|ms|s|m|h))+$`)
	percentFormat  = regexp.MustCompile(`^(100([.]0+)?|[0-9]{1,2}([.][0-9]+)?)%$`)
)

// Parse returns the duration's value. An empty Duration is zero.
func (d Duration) Parse() (time.Duration, error) {
	if d == "" {
		return 0, nil
	}
	if !durationFormat.MatchString(string(d)) {
		return 0, fmt.Errorf("must be a duration such as 30s, 5m or 1h30m (units: ns, us, ms, s, m, h)")
	}
	v, err := time.ParseDuration(string(d))
	if err != nil {
		return 0, fmt.Errorf("must be a duration such as 30s, 5m or 1h30m: %w", err)
	}
	return v, nil
}

// Fraction returns the percentage as a fraction: "5%" is 0.05. An empty Percent is 0.
func (p Percent) Fraction() (float64, error) {
	if p == "" {
		return 0, nil
	}
	if !percentFormat.MatchString(string(p)) {
		return 0, fmt.Errorf("must be a percentage from 0%% to 100%%, such as 5%% or 2.5%%")
	}
	v, err := strconv.ParseFloat(strings.TrimSuffix(string(p), "%"), 64)
	if err != nil {
		return 0, fmt.Errorf("must be a percentage from 0%% to 100%%, such as 5%% or 2.5%%")
	}
	return v / 100, nil
}

// StageName is the name of stage i: its Name, or when unnamed its QPS, or c
// and its concurrency (c10).
func (s *PerfExperimentSpec) StageName(i int) string {
	st := s.Stages[i]
	switch {
	case st.Name != "":
		return st.Name
	case st.Concurrency > 0:
		return "c" + strconv.Itoa(int(st.Concurrency))
	}
	return strconv.Itoa(int(st.QPS))
}

// LoadLabel is a stage's load as people say it: "1000qps", "1 VU" or "10 VUs".
func (st StageSpec) LoadLabel() string {
	switch {
	case st.Concurrency == 1:
		return "1 VU"
	case st.Concurrency > 0:
		return strconv.Itoa(int(st.Concurrency)) + " VUs"
	}
	return strconv.Itoa(int(st.QPS)) + "qps"
}

// HasToggle reports whether the experiment switches something (a toggle or
// variants); without either it is a load-only sweep.
func (s *PerfExperimentSpec) HasToggle() bool { return s.Switch().Kind() != "" }

// Arm is one change measured against the baseline: spec.toggle (Name "") or
// one of spec.variants.
type Arm struct {
	// Name is the variant's name, "" for spec.toggle.
	Name string
	// Index is the arm's position: 0 for spec.toggle, its index in
	// spec.variants otherwise.
	Index int32
	// Toggle is the arm's change.
	Toggle *ToggleSpec
}

// Arms lists the changes measured against the baseline, in run order: none
// for a load-only sweep, spec.toggle alone, or each of spec.variants.
func (s *PerfExperimentSpec) Arms() []Arm {
	if len(s.Variants) > 0 {
		arms := make([]Arm, len(s.Variants))
		for i := range s.Variants {
			arms[i] = Arm{Name: s.Variants[i].Name, Index: int32(i), Toggle: &s.Variants[i].Toggle}
		}
		return arms
	}
	if s.Toggle != nil && s.Toggle.Kind() != "" {
		return []Arm{{Toggle: s.Toggle}}
	}
	return nil
}

// ArmNamed is the arm called name ("" is spec.toggle), or false.
func (s *PerfExperimentSpec) ArmNamed(name string) (Arm, bool) {
	for _, a := range s.Arms() {
		if a.Name == name {
			return a, true
		}
	}
	return Arm{}, false
}

// Switch is the experiment's toggle as far as its kind goes: spec.toggle, or
// the first variant's (every variant has the same kind, the same variable
// for env), nil for a load-only sweep. What depends only on the kind — whether
// it rolls the pods, the original-state record, the rights it needs — is
// read from it; what a variant's toggle sets is read from its arm.
func (s *PerfExperimentSpec) Switch() *ToggleSpec {
	if len(s.Variants) > 0 {
		return &s.Variants[0].Toggle
	}
	return s.Toggle
}

// ToggleKind names the toggle's kind: env, jvmOption, args, http or exec ("" if none).
func (t *ToggleSpec) Kind() string {
	if t == nil {
		return ""
	}
	switch {
	case t.Env != nil:
		return "env"
	case t.JVMOption != "":
		return "jvmOption"
	case len(t.Args) > 0:
		return "args"
	case t.HTTP != nil:
		return "http"
	case t.Exec != nil:
		return "exec"
	}
	return ""
}

// RollsPods reports whether applying the toggle changes the pod template, and so
// causes a rollout: env, jvmOption and args do; runtime (http, exec) toggles, and
// no toggle at all, do not. It is the one definition the engine, the controller
// and validation use.
func (t *ToggleSpec) RollsPods() bool {
	switch t.Kind() {
	case "env", "jvmOption", "args":
		return true
	}
	return false
}

// Interleaved reports whether the spec's design is interleaved.
func (s *PerfExperimentSpec) Interleaved() bool { return s.Design == DesignInterleaved }

// RoundsPerStage is an interleaved stage's round count (defaulted).
func (s *PerfExperimentSpec) RoundsPerStage() int32 {
	if s.Interleaving != nil && s.Interleaving.Rounds > 0 {
		return s.Interleaving.Rounds
	}
	return DefaultRounds
}
