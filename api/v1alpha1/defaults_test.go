package v1alpha1

import (
	"math"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/resource"
	"sigs.k8s.io/yaml"
)

// minimalExperiment has only the required fields: everything else is defaulted.
func minimalExperiment() *PerfExperiment {
	return &PerfExperiment{Spec: PerfExperimentSpec{
		Target: TargetSpec{Deployment: "app", URL: "http://app:8080"},
		Load: LoadSpec{
			Requests:  []RequestSpec{{Path: "/a"}, {Path: "/b"}},
			ScriptRef: &ScriptRef{Name: "scripts"},
		},
		Stages: []StageSpec{{QPS: 10}},
		Toggle: &ToggleSpec{HTTP: &HTTPToggle{
			HTTPRequest: HTTPRequest{Path: "/on"},
			Port:        8081,
			Revert:      HTTPRequest{Path: "/off"},
		}},
	}}
}

func specYAML(t *testing.T, s PerfExperimentSpec) string {
	t.Helper()
	b, err := yaml.Marshal(s)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestDefaultFillsEveryDefault(t *testing.T) {
	in := minimalExperiment()
	in.Default()
	s := in.Spec

	checks := []struct {
		name      string
		got, want any
	}{
		{"windows.baseline", s.Windows.Baseline, Duration("30m")},
		{"windows.treatment", s.Windows.Treatment, Duration("30m")},
		{"windows.settle", s.Windows.Settle, Duration("2m")},
		{"metrics.source", s.Metrics.Source, MetricsSourceAuto},
		{"metrics.interval", s.Metrics.Interval, Duration("15s")},
		{"load.timeout", s.Load.Timeout, Duration("10s")},
		{"load.k6.image", s.Load.K6.Image, "grafana/k6:1.8.1"},
		{"load.k6.parallelism", s.Load.K6.Parallelism, int32(1)},
		{"load.requests[0].method", s.Load.Requests[0].Method, "GET"},
		{"load.requests[0].weight", s.Load.Requests[0].Weight, int32(1)},
		{"load.requests[1].method", s.Load.Requests[1].Method, "GET"},
		{"load.requests[1].weight", s.Load.Requests[1].Weight, int32(1)},
		{"load.scriptRef.key", s.Load.ScriptRef.Key, "script.js"},
		{"toggle.http.method", s.Toggle.HTTP.Method, "POST"},
		{"toggle.http.revert.method", s.Toggle.HTTP.Revert.Method, "POST"},
		{"toggle.http.scheme", s.Toggle.HTTP.Scheme, "http"},
		{"toggle.http.timeout", s.Toggle.HTTP.Timeout, Duration("5s")},
		{"guardrails.errorRate", s.Guardrails.ErrorRate, Percent("5%")},
		{"guardrails.heap.maxUtilization", s.Guardrails.Heap.MaxUtilization, Percent("90%")},
		{"guardrails.heap.consecutiveBreaches", s.Guardrails.Heap.ConsecutiveBreaches, int32(3)},
		{"cleanup.jobs", s.Cleanup.Jobs, JobsPolicyDelete},
		// Not defaulted: no marker gives them a value.
		{"guardrails.maxRestarts", s.Guardrails.MaxRestarts, int32(0)},
		{"guardrails.rolloutTimeout", s.Guardrails.RolloutTimeout, Duration("")},
		{"warmup", s.Warmup == nil, true},
		{"successCriteria", s.SuccessCriteria == nil, true},
		{"metrics.prometheus", s.Metrics.Prometheus == nil, true},
	}
	for _, c := range checks {
		if c.got != c.want {
			t.Errorf("%s = %#v, want %#v", c.name, c.got, c.want)
		}
	}
	if q := s.Guardrails.Heap.MaxGrowthPerMinute; q == nil {
		t.Errorf("guardrails.heap.maxGrowthPerMinute = nil, want 100Mi")
	} else if want := resource.MustParse("100Mi"); q.Cmp(want) != 0 {
		t.Errorf("guardrails.heap.maxGrowthPerMinute = %s, want 100Mi", q)
	}
}

// The Default* constants are what the +kubebuilder:default markers say; a typo in
// one of them would make Go and the apiserver default differently.
func TestDefaultConstants(t *testing.T) {
	for _, c := range []struct {
		name      string
		got, want any
	}{
		{"DefaultBaseline", DefaultBaseline, Duration("30m")},
		{"DefaultTreatment", DefaultTreatment, Duration("30m")},
		{"DefaultSettle", DefaultSettle, Duration("2m")},
		{"DefaultMetricsInterval", DefaultMetricsInterval, Duration("15s")},
		{"DefaultLoadTimeout", DefaultLoadTimeout, Duration("10s")},
		{"DefaultHTTPToggleTimeout", DefaultHTTPToggleTimeout, Duration("5s")},
		{"DefaultExecToggleTimeout", DefaultExecToggleTimeout, Duration("30s")},
		{"DefaultK6Image", DefaultK6Image, "grafana/k6:1.8.1"},
		{"DefaultK6Parallelism", DefaultK6Parallelism, int32(1)},
		{"DefaultErrorRate", DefaultErrorRate, Percent("5%")},
		{"DefaultMaxUtilization", DefaultMaxUtilization, Percent("90%")},
		{"DefaultMaxGrowthPerMinute", DefaultMaxGrowthPerMinute, "100Mi"},
		{"DefaultConsecutive", DefaultConsecutive, int32(3)},
		{"DefaultScriptKey", DefaultScriptKey, "script.js"},
		{"DefaultJobsPolicy", DefaultJobsPolicy, JobsPolicyDelete},
	} {
		if c.got != c.want {
			t.Errorf("%s = %#v, want %#v", c.name, c.got, c.want)
		}
	}
}

func TestDefaultWithoutOptionalParts(t *testing.T) {
	// No requests, no scriptRef, a non-http toggle: Default must not create them.
	in := &PerfExperiment{Spec: PerfExperimentSpec{Toggle: &ToggleSpec{JVMOption: "-Xint"}}}
	in.Default()
	if in.Spec.Load.ScriptRef != nil {
		t.Errorf("load.scriptRef = %#v, want nil", in.Spec.Load.ScriptRef)
	}
	if in.Spec.Load.Requests != nil {
		t.Errorf("load.requests = %#v, want nil", in.Spec.Load.Requests)
	}
	if in.Spec.Toggle.HTTP != nil {
		t.Errorf("toggle.http = %#v, want nil", in.Spec.Toggle.HTTP)
	}
	if in.Spec.Windows.Baseline != DefaultBaseline {
		t.Errorf("windows.baseline = %q, want %q", in.Spec.Windows.Baseline, DefaultBaseline)
	}
}

func TestDefaultExecTimeout(t *testing.T) {
	in := &PerfExperiment{Spec: PerfExperimentSpec{Toggle: &ToggleSpec{Exec: &ExecToggle{Command: []string{"true"}, Revert: []string{"true"}}}}}
	in.Default()
	if got := in.Spec.Toggle.Exec.Timeout; got != DefaultExecToggleTimeout {
		t.Errorf("toggle.exec.timeout = %q, want %q", got, DefaultExecToggleTimeout)
	}
	in.Spec.Toggle.Exec.Timeout = "2m"
	in.Default()
	if got := in.Spec.Toggle.Exec.Timeout; got != "2m" {
		t.Errorf("toggle.exec.timeout = %q after defaulting a set value, want 2m", got)
	}
}

func TestDefaultNeverOverwritesSetFields(t *testing.T) {
	tests := []struct {
		name  string
		set   func(*PerfExperimentSpec)
		check func(*PerfExperimentSpec) (got, want any)
	}{
		{"windows.baseline",
			func(s *PerfExperimentSpec) { s.Windows.Baseline = "10m" },
			func(s *PerfExperimentSpec) (any, any) { return s.Windows.Baseline, Duration("10m") }},
		{"windows.treatment",
			func(s *PerfExperimentSpec) { s.Windows.Treatment = "11m" },
			func(s *PerfExperimentSpec) (any, any) { return s.Windows.Treatment, Duration("11m") }},
		{"windows.settle",
			func(s *PerfExperimentSpec) { s.Windows.Settle = "0s" },
			func(s *PerfExperimentSpec) (any, any) { return s.Windows.Settle, Duration("0s") }},
		{"metrics.source",
			func(s *PerfExperimentSpec) { s.Metrics.Source = MetricsSourceMetricsServer },
			func(s *PerfExperimentSpec) (any, any) { return s.Metrics.Source, MetricsSourceMetricsServer }},
		{"metrics.interval",
			func(s *PerfExperimentSpec) { s.Metrics.Interval = "30s" },
			func(s *PerfExperimentSpec) (any, any) { return s.Metrics.Interval, Duration("30s") }},
		{"load.timeout",
			func(s *PerfExperimentSpec) { s.Load.Timeout = "1m" },
			func(s *PerfExperimentSpec) (any, any) { return s.Load.Timeout, Duration("1m") }},
		{"load.k6.image",
			func(s *PerfExperimentSpec) { s.Load.K6.Image = "example.com/k6:custom" },
			func(s *PerfExperimentSpec) (any, any) { return s.Load.K6.Image, "example.com/k6:custom" }},
		{"load.k6.parallelism",
			func(s *PerfExperimentSpec) { s.Load.K6.Parallelism = 4 },
			func(s *PerfExperimentSpec) (any, any) { return s.Load.K6.Parallelism, int32(4) }},
		{"load.requests[1].method",
			func(s *PerfExperimentSpec) { s.Load.Requests[1].Method = "PUT" },
			func(s *PerfExperimentSpec) (any, any) { return s.Load.Requests[1].Method, "PUT" }},
		{"load.requests[1].weight",
			func(s *PerfExperimentSpec) { s.Load.Requests[1].Weight = 7 },
			func(s *PerfExperimentSpec) (any, any) { return s.Load.Requests[1].Weight, int32(7) }},
		{"load.scriptRef.key",
			func(s *PerfExperimentSpec) { s.Load.ScriptRef.Key = "load.js" },
			func(s *PerfExperimentSpec) (any, any) { return s.Load.ScriptRef.Key, "load.js" }},
		{"toggle.http.method",
			func(s *PerfExperimentSpec) { s.Toggle.HTTP.Method = "PUT" },
			func(s *PerfExperimentSpec) (any, any) { return s.Toggle.HTTP.Method, "PUT" }},
		{"toggle.http.revert.method",
			func(s *PerfExperimentSpec) { s.Toggle.HTTP.Revert.Method = "DELETE" },
			func(s *PerfExperimentSpec) (any, any) { return s.Toggle.HTTP.Revert.Method, "DELETE" }},
		{"toggle.http.scheme",
			func(s *PerfExperimentSpec) { s.Toggle.HTTP.Scheme = "https" },
			func(s *PerfExperimentSpec) (any, any) { return s.Toggle.HTTP.Scheme, "https" }},
		{"toggle.http.timeout",
			func(s *PerfExperimentSpec) { s.Toggle.HTTP.Timeout = "30s" },
			func(s *PerfExperimentSpec) (any, any) { return s.Toggle.HTTP.Timeout, Duration("30s") }},
		{"guardrails.errorRate",
			func(s *PerfExperimentSpec) { s.Guardrails.ErrorRate = "1%" },
			func(s *PerfExperimentSpec) (any, any) { return s.Guardrails.ErrorRate, Percent("1%") }},
		{"guardrails.heap.maxGrowthPerMinute",
			func(s *PerfExperimentSpec) {
				q := resource.MustParse("10Mi")
				s.Guardrails.Heap.MaxGrowthPerMinute = &q
			},
			func(s *PerfExperimentSpec) (any, any) {
				return s.Guardrails.Heap.MaxGrowthPerMinute.String(), "10Mi"
			}},
		{"guardrails.heap.maxUtilization",
			func(s *PerfExperimentSpec) { s.Guardrails.Heap.MaxUtilization = "75%" },
			func(s *PerfExperimentSpec) (any, any) { return s.Guardrails.Heap.MaxUtilization, Percent("75%") }},
		{"guardrails.heap.consecutiveBreaches",
			func(s *PerfExperimentSpec) { s.Guardrails.Heap.ConsecutiveBreaches = 5 },
			func(s *PerfExperimentSpec) (any, any) { return s.Guardrails.Heap.ConsecutiveBreaches, int32(5) }},
		{"guardrails.maxRestarts",
			func(s *PerfExperimentSpec) { s.Guardrails.MaxRestarts = 2 },
			func(s *PerfExperimentSpec) (any, any) { return s.Guardrails.MaxRestarts, int32(2) }},
		{"guardrails.rolloutTimeout",
			func(s *PerfExperimentSpec) { s.Guardrails.RolloutTimeout = "15m" },
			func(s *PerfExperimentSpec) (any, any) { return s.Guardrails.RolloutTimeout, Duration("15m") }},
		{"cleanup.jobs",
			func(s *PerfExperimentSpec) { s.Cleanup.Jobs = JobsPolicyKeep },
			func(s *PerfExperimentSpec) (any, any) { return s.Cleanup.Jobs, JobsPolicyKeep }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			in := minimalExperiment()
			tt.set(&in.Spec)
			in.Default()
			if got, want := tt.check(&in.Spec); got != want {
				t.Errorf("after Default: %#v, want %#v", got, want)
			}
			// Every other field is still defaulted as usual.
			want := minimalExperiment()
			want.Default()
			tt.set(&want.Spec)
			if !equality.Semantic.DeepEqual(in.Spec, want.Spec) {
				t.Errorf("Default changed more than the set field:\n--- got\n%s--- want\n%s",
					specYAML(t, in.Spec), specYAML(t, want.Spec))
			}
		})
	}
}

func TestDefaultIsIdempotent(t *testing.T) {
	for name, in := range map[string]*PerfExperiment{
		"minimal":          minimalExperiment(),
		"profiling":        profilingOverhead(),
		"env toggle":       {Spec: PerfExperimentSpec{Toggle: &ToggleSpec{Env: &EnvToggle{Name: "X", Remove: true}}}},
		"empty experiment": {},
	} {
		t.Run(name, func(t *testing.T) {
			in.Default()
			once := in.DeepCopy()
			in.Default()
			if !equality.Semantic.DeepEqual(once.Spec, in.Spec) {
				t.Errorf("second Default changed the spec:\n--- once\n%s--- twice\n%s",
					specYAML(t, once.Spec), specYAML(t, in.Spec))
			}
		})
	}
}

func TestDurationParse(t *testing.T) {
	good := []struct {
		in   Duration
		want time.Duration
	}{
		{"30s", 30 * time.Second},
		{"1h30m", 90 * time.Minute},
		{"250ms", 250 * time.Millisecond},
		{"", 0},
		{"0s", 0},
		{"1.5h", 90 * time.Minute},
		{"100us", 100 * time.Microsecond},
		{"24h", 24 * time.Hour},
	}
	for _, tt := range good {
		t.Run(string(tt.in), func(t *testing.T) {
			got, err := tt.in.Parse()
			if err != nil || got != tt.want {
				t.Errorf("Duration(%q).Parse() = %v, %v; want %v, nil", tt.in, got, err, tt.want)
			}
		})
	}
	// The last ones are accepted by time.ParseDuration but refused by the CRD's
	// format, so they must be refused in Go too.
	bad := []Duration{"10 seconds", "-5m", "5", "m", "1d", "5m ", " 5m",
		"0", "+5m", "-0s", ".5s", "5.s", "1µs"}
	for _, in := range bad {
		t.Run(string(in), func(t *testing.T) {
			if got, err := in.Parse(); err == nil {
				t.Errorf("Duration(%q).Parse() = %v, nil; want an error", in, got)
			}
		})
	}
}

func TestPercentFraction(t *testing.T) {
	good := []struct {
		in   Percent
		want float64
	}{
		{"5%", 0.05},
		{"2.5%", 0.025},
		{"100%", 1},
		{"0%", 0},
		{"", 0},
		{"100.0%", 1},
		{"99.99%", 0.9999},
		{"0.5%", 0.005},
	}
	for _, tt := range good {
		t.Run(string(tt.in), func(t *testing.T) {
			got, err := tt.in.Fraction()
			if err != nil || math.Abs(got-tt.want) > 1e-12 {
				t.Errorf("Percent(%q).Fraction() = %v, %v; want %v, nil", tt.in, got, err, tt.want)
			}
		})
	}
	// NaN%, 1_0% and 0x1p1% are accepted by strconv.ParseFloat but are no
	// percentages; NaN in a guardrail would never trip.
	bad := []Percent{"150%", "5", "-1%", "1e1%", "+5%", "abc%", "%",
		"100.5%", "NaN%", "nan%", "Inf%", "1_0%", "0x1p1%", ".5%", "5.%", "005%", " 5%", "5%%", "5 %"}
	for _, in := range bad {
		t.Run(string(in), func(t *testing.T) {
			if got, err := in.Fraction(); err == nil {
				t.Errorf("Percent(%q).Fraction() = %v, nil; want an error", in, got)
			}
		})
	}
}

func TestFmtDuration(t *testing.T) {
	for _, tt := range []struct {
		in   time.Duration
		want string
	}{
		{0, "0s"},
		{20 * time.Second, "20s"},
		{10 * time.Second, "10s"},
		{5 * time.Minute, "5m"},
		{24 * time.Hour, "24h"},
		{90 * time.Second, "90s"},
		{1500 * time.Millisecond, "1.5s"},
		{100 * time.Millisecond, "100ms"},
		{2 * time.Hour, "2h"},
		{90 * time.Minute, "90m"},
	} {
		if got := fmtDuration(tt.in); got != tt.want {
			t.Errorf("fmtDuration(%v) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

func TestToggleKind(t *testing.T) {
	value := "on"
	for _, tt := range []struct {
		name      string
		toggle    ToggleSpec
		kind      string
		rollsPods bool
	}{
		{"env value", ToggleSpec{Env: &EnvToggle{Name: "PROFILING", Value: &value}}, "env", true},
		{"env remove", ToggleSpec{Env: &EnvToggle{Name: "PROFILING", Remove: true}}, "env", true},
		{"jvmOption", ToggleSpec{JVMOption: "-XX:+UseSerialGC"}, "jvmOption", true},
		{"args", ToggleSpec{Args: []string{"--profiling"}}, "args", true},
		{"http", ToggleSpec{HTTP: &HTTPToggle{HTTPRequest: HTTPRequest{Path: "/on"}, Port: 8081}}, "http", false},
		{"exec", ToggleSpec{Exec: &ExecToggle{Command: []string{"true"}, Revert: []string{"true"}}}, "exec", false},
		{"none", ToggleSpec{}, "", false},
		{"empty args", ToggleSpec{Args: []string{}}, "", false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.toggle.Kind(); got != tt.kind {
				t.Errorf("Kind() = %q, want %q", got, tt.kind)
			}
			if got := tt.toggle.RollsPods(); got != tt.rollsPods {
				t.Errorf("RollsPods() = %v, want %v", got, tt.rollsPods)
			}
		})
	}
}

func TestStageName(t *testing.T) {
	s := PerfExperimentSpec{Stages: []StageSpec{{QPS: 500}, {QPS: 1000, Name: "peak"}, {QPS: 2000, Name: ""}}}
	for i, want := range []string{"500", "peak", "2000"} {
		if got := s.StageName(i); got != want {
			t.Errorf("StageName(%d) = %q, want %q", i, got, want)
		}
	}
}
