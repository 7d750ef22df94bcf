package v1alpha1

import (
	"fmt"
	"net/url"
	"regexp"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// baseURLFormat is the CRD's format of target.url: an absolute http(s) URL with a
// host and no query or fragment, because request paths are appended to it.
var baseURLFormat = regexp.MustCompile(`^https?://[^/?#[:space:]]+(/[^?#[:space:]]*)?$`)

// Validate checks, in Go, the rules the engine relies on. The CRD's OpenAPI and
// CEL rules refuse bad manifests at admission; Validate is the same contract for
// manifests read offline (kubectl-perf) and a last line of defence for objects that
// reached the cluster without the CRD's validation. It expects a defaulted spec.
func (in *PerfExperiment) Validate() field.ErrorList {
	s := &in.Spec
	p := field.NewPath("spec")
	var errs field.ErrorList

	for _, msg := range validation.IsDNS1123Subdomain(s.Target.Deployment) {
		errs = append(errs, field.Invalid(p.Child("target", "deployment"), s.Target.Deployment, msg))
	}
	if s.Target.URL != "" {
		if _, err := url.Parse(s.Target.URL); err != nil || !baseURLFormat.MatchString(s.Target.URL) {
			errs = append(errs, field.Invalid(p.Child("target", "url"), s.Target.URL, "must be an absolute http:// or https:// URL without query or fragment, such as http://app.shop.svc:8080"))
		}
	}
	errs = append(errs, validateLoad(s, p)...)

	if s.Warmup != nil {
		errs = append(errs, durationIn(p.Child("warmup", "duration"), s.Warmup.Duration, time.Second, 24*time.Hour)...)
		errs = append(errs, qps(p.Child("warmup", "qps"), s.Warmup.QPS)...)
	}
	if len(s.Stages) == 0 {
		errs = append(errs, field.Required(p.Child("stages"), "at least one stage is required"))
	}
	for i, st := range s.Stages {
		sp := p.Child("stages").Index(i)
		switch {
		case (st.QPS != 0) == (st.Concurrency != 0):
			errs = append(errs, field.Invalid(sp, "", "set exactly one of qps (an arrival rate) or concurrency (closed-loop virtual users)"))
		case st.Concurrency != 0:
			if st.Concurrency < 1 || st.Concurrency > 10000 {
				errs = append(errs, field.Invalid(sp.Child("concurrency"), st.Concurrency, "must be from 1 to 10000"))
			}
		default:
			errs = append(errs, qps(sp.Child("qps"), st.QPS)...)
		}
	}
	errs = append(errs, percent(p.Child("knee", "rateShortfall"), s.Knee.RateShortfall)...)
	if f := s.Knee.P99Factor; f < 2 || f > 1000 {
		errs = append(errs, field.Invalid(p.Child("knee", "p99Factor"), f, "must be from 2 to 1000"))
	}

	interval, _ := s.Metrics.Interval.Parse()
	intervalErrs := durationIn(p.Child("metrics", "interval"), s.Metrics.Interval, time.Second, 5*time.Minute)
	errs = append(errs, intervalErrs...)
	for _, w := range []struct {
		name string
		d    Duration
	}{{"baseline", s.Windows.Baseline}, {"treatment", s.Windows.Treatment}} {
		fp := p.Child("windows", w.name)
		errs = append(errs, durationIn(fp, w.d, 20*time.Second, 24*time.Hour)...)
		// An abort request is never refused for its windows: an experiment
		// created under an older, looser rule must stay stoppable (test/crd
		// TestOldExperimentsStayAbortableAfterTheWindowRuleTightened).
		if v, err := w.d.Parse(); err == nil && len(intervalErrs) == 0 && !s.Abort {
			if least, why := s.MinMeasuredWindow(interval); v < least {
				errs = append(errs, field.Invalid(fp, w.d, fmt.Sprintf("must be at least %s long: %s", least, why)))
			}
		}
	}
	errs = append(errs, durationIn(p.Child("windows", "settle"), s.Windows.Settle, 0, time.Hour)...)

	if s.Toggle != nil {
		errs = append(errs, validateToggle(s.Toggle, p.Child("toggle"))...)
	}
	errs = append(errs, validateVariants(s, p)...)
	if s.Toggle == nil && s.Calibrate {
		errs = append(errs, field.Invalid(p.Child("calibrate"), true, "an A/A calibration measures one toggle's two arms: set toggle (not variants), or drop calibrate"))
	}
	if s.Toggle == nil && len(s.Variants) == 0 && s.SuccessCriteria != nil {
		errs = append(errs, field.Invalid(p.Child("successCriteria"), "", "success criteria are a toggle's overheads: set toggle or variants, or drop successCriteria for a load-only sweep"))
	}
	errs = append(errs, validateDesign(s, p)...)
	if s.Metrics.Source == MetricsSourcePrometheus && s.Metrics.Prometheus == nil {
		errs = append(errs, field.Required(p.Child("metrics", "prometheus"), "metrics.prometheus.url is required when metrics.source is prometheus"))
	}
	errs = append(errs, validateGuardrails(&s.Guardrails, p.Child("guardrails"))...)
	if c := s.SuccessCriteria; c != nil {
		cp := p.Child("successCriteria")
		errs = append(errs, percent(cp.Child("maxCPUOverhead"), c.MaxCPUOverhead)...)
		errs = append(errs, percent(cp.Child("maxMemoryOverhead"), c.MaxMemoryOverhead)...)
		errs = append(errs, percent(cp.Child("maxP99Overhead"), c.MaxP99Overhead)...)
	}
	return errs
}

// MaxVariants bounds spec.variants: each one adds a treatment window (and,
// for a toggle that rolls the pods, two rollouts) to every stage.
const MaxVariants = 5

// validateVariants checks spec.variants: unique names, each a valid toggle,
// all of the same kind (for env, of the same variable), so that the one
// original-state record the lock writes restores any of them.
func validateVariants(s *PerfExperimentSpec, p *field.Path) field.ErrorList {
	if len(s.Variants) == 0 {
		return nil
	}
	vp := p.Child("variants")
	var errs field.ErrorList
	if s.Toggle != nil {
		errs = append(errs, field.Invalid(vp, "", "set either toggle (one change against the baseline) or variants (several), not both"))
	}
	if len(s.Variants) > MaxVariants {
		errs = append(errs, field.Invalid(vp, len(s.Variants), fmt.Sprintf("at most %d variants: each adds a treatment window to every stage", MaxVariants)))
	}
	seen := map[string]bool{}
	first := &s.Variants[0].Toggle
	for i := range s.Variants {
		v := &s.Variants[i]
		ip := vp.Index(i)
		switch msgs := validation.IsDNS1123Label(v.Name); {
		case len(msgs) > 0:
			errs = append(errs, field.Invalid(ip.Child("name"), v.Name, "must be a lower-case DNS label, such as serial"))
		case len(v.Name) > 20:
			errs = append(errs, field.Invalid(ip.Child("name"), v.Name, "must be at most 20 characters: it is part of the variant's Job names"))
		case seen[v.Name]:
			errs = append(errs, field.Invalid(ip.Child("name"), v.Name, "another variant has this name: each needs its own"))
		}
		seen[v.Name] = true
		terrs := validateToggle(&v.Toggle, ip.Child("toggle"))
		errs = append(errs, terrs...)
		if len(terrs) > 0 || i == 0 {
			continue
		}
		switch {
		case v.Toggle.Kind() != first.Kind():
			errs = append(errs, field.Invalid(ip.Child("toggle"), v.Toggle.Kind(), fmt.Sprintf("every variant must use the same toggle kind (the first is %s), so that one original-state record restores any of them; compare different kinds in separate experiments", first.Kind())))
		case v.Toggle.Env != nil && v.Toggle.Env.Name != first.Env.Name:
			errs = append(errs, field.Invalid(ip.Child("toggle", "env", "name"), v.Toggle.Env.Name, fmt.Sprintf("every env variant must set the same variable (the first sets %s), so that one original-state record restores any of them", first.Env.Name)))
		}
	}
	if s.Design == DesignInterleaved {
		errs = append(errs, field.Invalid(p.Child("design"), s.Design, "variants run one after the other against one baseline: use design sequential"))
	}
	return errs
}

func validateDesign(s *PerfExperimentSpec, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	switch s.Design {
	case DesignSequential:
	case DesignInterleaved:
		if len(s.Variants) == 0 && (s.Toggle.RollsPods() || !s.HasToggle()) {
			errs = append(errs, field.Invalid(p.Child("design"), s.Design, "interleaved switches the toggle several times under one continuous load, so it needs a runtime toggle (http or exec); env, jvmOption and args roll the pods: use design sequential"))
		}
	default:
		errs = append(errs, field.NotSupported(p.Child("design"), s.Design, []string{string(DesignSequential), string(DesignInterleaved)}))
	}
	il := s.Interleaving
	if il == nil {
		return errs
	}
	ip := p.Child("interleaving")
	if s.Design != DesignInterleaved {
		errs = append(errs, field.Invalid(ip, "", "is only used with design interleaved"))
	}
	if il.Rounds < 2 || il.Rounds > 50 {
		errs = append(errs, field.Invalid(ip.Child("rounds"), il.Rounds, "must be from 2 to 50: the interval comes from the rounds"))
	}
	if il.Order != OrderABBA && il.Order != OrderRandom {
		errs = append(errs, field.NotSupported(ip.Child("order"), il.Order, []string{string(OrderABBA), string(OrderRandom)}))
	}
	return errs
}

func validateLoad(s *PerfExperimentSpec, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	lp := p.Child("load")
	if (len(s.Load.Requests) > 0) == (s.Load.ScriptRef != nil) {
		errs = append(errs, field.Invalid(lp, "", "set exactly one of load.requests (a generated k6 script) or load.scriptRef (your own k6 script in a ConfigMap)"))
	}
	if len(s.Load.Requests) > 0 && s.Target.URL == "" {
		errs = append(errs, field.Required(p.Child("target", "url"), "target.url is required when load.requests generates the k6 script"))
	}
	for i, r := range s.Load.Requests {
		if !strings.HasPrefix(r.Path, "/") {
			errs = append(errs, field.Invalid(lp.Child("requests").Index(i).Child("path"), r.Path, "must start with /"))
		}
		if r.Weight < 1 || r.Weight > 1000 {
			errs = append(errs, field.Invalid(lp.Child("requests").Index(i).Child("weight"), r.Weight, "must be from 1 to 1000"))
		}
	}
	errs = append(errs, durationIn(lp.Child("timeout"), s.Load.Timeout, 100*time.Millisecond, 5*time.Minute)...)
	if s.Load.K6.Parallelism < 1 || s.Load.K6.Parallelism > 20 {
		errs = append(errs, field.Invalid(lp.Child("k6", "parallelism"), s.Load.K6.Parallelism, "must be from 1 to 20"))
	}
	errs = append(errs, validateK6Pods(&s.Load.K6, lp.Child("k6"))...)
	return errs
}

// reservedK6Env are the variables the operator sets in the k6 container.
var reservedK6Env = map[string]bool{"JOB_COMPLETION_INDEX": true, "K6_NO_USAGE_REPORT": true, "K6_AUTO_EXTENSION_RESOLUTION": true, "GOMEMLIMIT": true}

// reservedK6Arg matches the k6 flags the operator sets or that would hide the
// results it reads; the CRD's CEL rule is the same expression.
var reservedK6Arg = regexp.MustCompile(`^(-u|-d|-i|-s|-p|-q|--vus|--duration|--iterations|--stage|--paused|--address|--no-summary|--summary-export|--quiet|--include-system-env-vars)(=.*)?$`)

// validateK6Pods checks the settings that reach the k6 pods: nothing may
// override what the operator sets, and labels, names and variables must be
// what the Job's own validation accepts.
func validateK6Pods(k *K6Spec, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	seen := map[string]bool{}
	for i, e := range k.Env {
		fp := p.Child("env").Index(i).Child("name")
		for _, msg := range validation.IsEnvVarName(e.Name) {
			errs = append(errs, field.Invalid(fp, e.Name, msg))
		}
		if strings.HasPrefix(e.Name, "PERF_") || reservedK6Env[e.Name] {
			errs = append(errs, field.Invalid(fp, e.Name, "must not set a variable the operator sets: PERF_*, JOB_COMPLETION_INDEX, K6_NO_USAGE_REPORT, K6_AUTO_EXTENSION_RESOLUTION, GOMEMLIMIT"))
		}
		if seen[e.Name] {
			errs = append(errs, &field.Error{Type: field.ErrorTypeDuplicate, Field: fp.String(), BadValue: e.Name, Detail: "each variable may be set once"})
		}
		seen[e.Name] = true
	}
	for i, a := range k.ExtraArgs {
		if reservedK6Arg.MatchString(a) {
			errs = append(errs, field.Invalid(p.Child("extraArgs").Index(i), a, "must not set a flag the operator sets or that hides the results: --vus, --duration, --iterations, --stage, --paused, --address, --no-summary, --summary-export, --quiet, --include-system-env-vars"))
		}
	}
	labels := func(name string, m map[string]string, values bool) {
		for key, v := range m {
			fp := p.Child(name).Key(key)
			for _, msg := range validation.IsQualifiedName(key) {
				errs = append(errs, field.Invalid(fp, key, msg))
			}
			if values {
				for _, msg := range validation.IsValidLabelValue(v) {
					errs = append(errs, field.Invalid(fp, v, msg))
				}
			}
		}
	}
	labels("nodeSelector", k.NodeSelector, true)
	labels("podLabels", k.PodLabels, true)
	labels("podAnnotations", k.PodAnnotations, false)
	for key := range k.PodLabels {
		if strings.HasPrefix(key, "perfexp.dev/") || strings.HasPrefix(key, "batch.kubernetes.io/") || key == "job-name" || key == "controller-uid" {
			errs = append(errs, field.Invalid(p.Child("podLabels").Key(key), key, "must not set a label the operator or the Job controller sets: perfexp.dev/*, batch.kubernetes.io/*, job-name, controller-uid"))
		}
	}
	for i, ref := range k.ImagePullSecrets {
		for _, msg := range validation.IsDNS1123Subdomain(ref.Name) {
			errs = append(errs, field.Invalid(p.Child("imagePullSecrets").Index(i).Child("name"), ref.Name, msg))
		}
	}
	if k.ServiceAccountName != "" {
		for _, msg := range validation.IsDNS1123Subdomain(k.ServiceAccountName) {
			errs = append(errs, field.Invalid(p.Child("serviceAccountName"), k.ServiceAccountName, msg))
		}
	}
	return errs
}

func validateToggle(t *ToggleSpec, p *field.Path) field.ErrorList {
	n := 0
	for _, set := range []bool{t.Env != nil, t.JVMOption != "", len(t.Args) > 0, t.HTTP != nil, t.Exec != nil} {
		if set {
			n++
		}
	}
	if n != 1 {
		return field.ErrorList{field.Invalid(p, "", "set exactly one toggle kind: env, jvmOption, args, http or exec")}
	}
	var errs field.ErrorList
	switch {
	case t.Env != nil:
		if (t.Env.Value != nil) == t.Env.Remove {
			errs = append(errs, field.Invalid(p.Child("env"), "", "set exactly one of value or remove: true"))
		}
		for _, msg := range validation.IsEnvVarName(t.Env.Name) {
			errs = append(errs, field.Invalid(p.Child("env", "name"), t.Env.Name, msg))
		}
	case t.JVMOption != "":
		if !strings.HasPrefix(t.JVMOption, "-") {
			errs = append(errs, field.Invalid(p.Child("jvmOption"), t.JVMOption, "must be a JVM option starting with '-'"))
		}
	case t.HTTP != nil:
		if t.HTTP.Port < 1 || t.HTTP.Port > 65535 {
			errs = append(errs, field.Invalid(p.Child("http", "port"), t.HTTP.Port, "must be from 1 to 65535"))
		}
		if !strings.HasPrefix(t.HTTP.Path, "/") {
			errs = append(errs, field.Invalid(p.Child("http", "path"), t.HTTP.Path, "must start with /"))
		}
		if !strings.HasPrefix(t.HTTP.Revert.Path, "/") {
			errs = append(errs, field.Invalid(p.Child("http", "revert", "path"), t.HTTP.Revert.Path, "must start with /"))
		}
		errs = append(errs, durationIn(p.Child("http", "timeout"), t.HTTP.Timeout, 100*time.Millisecond, time.Minute)...)
	case t.Exec != nil:
		if len(t.Exec.Command) == 0 || t.Exec.Command[0] == "" {
			errs = append(errs, field.Invalid(p.Child("exec", "command"), t.Exec.Command, "must name a command to run, such as [jcmd, \"1\", JFR.start]"))
		}
		if len(t.Exec.Revert) == 0 || t.Exec.Revert[0] == "" {
			errs = append(errs, field.Invalid(p.Child("exec", "revert"), t.Exec.Revert, "must name the command that switches the feature back, such as [jcmd, \"1\", JFR.stop]"))
		}
		errs = append(errs, durationIn(p.Child("exec", "timeout"), t.Exec.Timeout, time.Second, 5*time.Minute)...)
	}
	return errs
}

func validateGuardrails(g *GuardrailsSpec, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	errs = append(errs, percent(p.Child("errorRate"), g.ErrorRate)...)
	errs = append(errs, percent(p.Child("heap", "maxUtilization"), g.Heap.MaxUtilization)...)
	if q := g.Heap.MaxGrowthPerMinute; q != nil && q.Cmp(resource.Quantity{}) <= 0 {
		errs = append(errs, field.Invalid(p.Child("heap", "maxGrowthPerMinute"), q.String(), "must be a positive quantity of bytes per minute"))
	}
	if g.Heap.ConsecutiveBreaches < 1 || g.Heap.ConsecutiveBreaches > 20 {
		errs = append(errs, field.Invalid(p.Child("heap", "consecutiveBreaches"), g.Heap.ConsecutiveBreaches, "must be from 1 to 20"))
	}
	if g.RolloutTimeout != "" {
		errs = append(errs, durationIn(p.Child("rolloutTimeout"), g.RolloutTimeout, 10*time.Second, 2*time.Hour)...)
	}
	return errs
}

func durationIn(p *field.Path, d Duration, lo, hi time.Duration) field.ErrorList {
	v, err := d.Parse()
	if err != nil {
		return field.ErrorList{field.Invalid(p, d, err.Error())}
	}
	if v < lo || v > hi {
		return field.ErrorList{field.Invalid(p, d, fmt.Sprintf("must be between %s and %s", fmtDuration(lo), fmtDuration(hi)))}
	}
	return nil
}

func percent(p *field.Path, v Percent) field.ErrorList {
	if _, err := v.Fraction(); err != nil {
		return field.ErrorList{field.Invalid(p, v, err.Error())}
	}
	return nil
}

func qps(p *field.Path, v int32) field.ErrorList {
	if v < 1 || v > 100000 {
		return field.ErrorList{field.Invalid(p, v, "must be from 1 to 100000 requests per second")}
	}
	return nil
}

// fmtDuration prints 20s, 5m or 24h rather than Go's 24h0m0s.
func fmtDuration(d time.Duration) string {
	switch {
	case d == 0:
		return "0s"
	case d%time.Hour == 0:
		return fmt.Sprintf("%dh", d/time.Hour)
	case d%time.Minute == 0:
		return fmt.Sprintf("%dm", d/time.Minute)
	case d%time.Second == 0:
		return fmt.Sprintf("%ds", d/time.Second)
	}
	return d.String()
}
