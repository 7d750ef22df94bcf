package v1alpha1

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"sigs.k8s.io/yaml"
)

func quantity(s string) *resource.Quantity {
	q := resource.MustParse(s)
	return &q
}

// profilingOverhead is examples/profiling-overhead.yaml, built in Go and defaulted.
func profilingOverhead() *PerfExperiment {
	in := &PerfExperiment{Spec: PerfExperimentSpec{
		Target: TargetSpec{Deployment: "mall-gateway", Container: "app", URL: "http://mall-gateway.shop.svc:8080"},
		Load: LoadSpec{
			Requests: []RequestSpec{
				{Path: "/case/api/v1/mysql/execute", Weight: 50},
				{Path: "/case/api/v1/redis/execute", Weight: 50},
			},
			K6: K6Spec{
				Image:       "grafana/k6:1.8.1",
				Parallelism: 1,
				Resources: &ResourcesSpec{
					Requests: &ResourceAmounts{CPU: quantity("1"), Memory: quantity("256Mi")},
					Limits:   &ResourceAmounts{CPU: quantity("2"), Memory: quantity("1Gi")},
				},
			},
		},
		Warmup:  &WarmupSpec{QPS: 50, Duration: "5m"},
		Stages:  []StageSpec{{QPS: 500}, {QPS: 1000}, {QPS: 2000}},
		Windows: WindowsSpec{Baseline: "30m", Treatment: "30m", Settle: "2m"},
		Toggle: &ToggleSpec{HTTP: &HTTPToggle{
			HTTPRequest: HTTPRequest{Method: "POST", Path: "/admin/profiling", Body: "on"},
			Port:        8081,
			Revert:      HTTPRequest{Method: "POST", Path: "/admin/profiling", Body: "off"},
		}},
		Metrics: MetricsSpec{
			Source:     MetricsSourceAuto,
			Prometheus: &PrometheusSpec{URL: "http://prometheus-operated.monitoring:9090"},
		},
		Guardrails: GuardrailsSpec{
			Heap:      HeapGuardrail{MaxGrowthPerMinute: quantity("100Mi"), MaxUtilization: "90%"},
			ErrorRate: "5%",
		},
		SuccessCriteria: &SuccessCriteria{MaxCPUOverhead: "5%", MaxMemoryOverhead: "5%", MaxP99Overhead: "10%"},
	}}
	in.Default()
	return in
}

// The Go base must stay a faithful copy of the example it mirrors.
func TestBaseMirrorsExample(t *testing.T) {
	b, err := os.ReadFile(filepath.Join("..", "..", "examples", "profiling-overhead.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var fromYAML PerfExperiment
	if err := yaml.UnmarshalStrict(b, &fromYAML); err != nil {
		t.Fatal(err)
	}
	fromYAML.Default()
	if base := profilingOverhead(); !equality.Semantic.DeepEqual(base.Spec, fromYAML.Spec) {
		t.Errorf("profilingOverhead() differs from examples/profiling-overhead.yaml:\n--- Go\n%s--- YAML\n%s",
			specYAML(t, base.Spec), specYAML(t, fromYAML.Spec))
	}
}

func TestValidBaseHasNoErrors(t *testing.T) {
	if errs := profilingOverhead().Validate(); len(errs) > 0 {
		t.Fatalf("valid experiment refused: %v", errs.ToAggregate())
	}
}

// Every example is a valid experiment once defaulted.
func TestExamplesValidate(t *testing.T) {
	top, _ := filepath.Glob(filepath.Join("..", "..", "examples", "*.yaml"))
	local, _ := filepath.Glob(filepath.Join("..", "..", "examples", "local", "*.yaml"))
	if len(top) == 0 || len(local) == 0 {
		t.Fatal("no examples found")
	}
	for _, f := range append(top, local...) {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(string(b), "\nkind: PerfExperiment\n") {
			continue // the local examples' target (a Deployment and Service)
		}
		t.Run(filepath.Base(filepath.Dir(f))+"/"+filepath.Base(f), func(t *testing.T) {
			var in PerfExperiment
			if err := yaml.UnmarshalStrict(b, &in); err != nil {
				t.Fatal(err)
			}
			in.Default()
			if errs := in.Validate(); len(errs) > 0 {
				t.Errorf("example refused: %v", errs.ToAggregate())
			}
		})
	}
}

// Mutations of the valid base that stay valid: the edges of each range.
func TestValidateAccepts(t *testing.T) {
	value := "on"
	tests := []struct {
		name   string
		mutate func(*PerfExperimentSpec)
	}{
		{"scriptRef instead of requests, no url", func(s *PerfExperimentSpec) {
			s.Load.Requests = nil
			s.Load.ScriptRef = &ScriptRef{Name: "k6-script", Key: "script.js"}
			s.Target.URL = ""
		}},
		{"https url with base path", func(s *PerfExperimentSpec) { s.Target.URL = "https://app.shop.svc:8443/base" }},
		{"no warmup", func(s *PerfExperimentSpec) { s.Warmup = nil }},
		{"no successCriteria", func(s *PerfExperimentSpec) { s.SuccessCriteria = nil }},
		{"settle 0s", func(s *PerfExperimentSpec) { s.Windows.Settle = "0s" }},
		{"settle 1h", func(s *PerfExperimentSpec) { s.Windows.Settle = "1h" }},
		{"windows 20s at interval 5s from metrics-server", func(s *PerfExperimentSpec) {
			s.Metrics.Source, s.Metrics.Prometheus = MetricsSourceMetricsServer, nil
			s.Windows.Baseline, s.Windows.Treatment, s.Metrics.Interval = "20s", "20s", "5s"
		}},
		{"window exactly 4 intervals from metrics-server", func(s *PerfExperimentSpec) {
			s.Metrics.Source, s.Metrics.Prometheus = MetricsSourceMetricsServer, nil
			s.Metrics.Interval, s.Windows.Baseline, s.Windows.Treatment = "5m", "20m", "20m"
		}},
		// With Prometheus: the lead-in, the 1m rate range, 4 samples and an
		// interval of margin (MinMeasuredWindow).
		// An abort is never refused for its windows (an experiment created
		// under the looser rule of older versions must stay stoppable).
		{"windows 2m at 15s from prometheus with spec.abort", func(s *PerfExperimentSpec) {
			s.Metrics.Interval, s.Windows.Baseline, s.Windows.Treatment, s.Abort = "15s", "2m", "2m", true
		}},
		{"windows 2m30s at 15s from prometheus", func(s *PerfExperimentSpec) {
			s.Metrics.Interval, s.Windows.Baseline, s.Windows.Treatment = "15s", "2m30s", "2m30s"
		}},
		{"windows 2m at 10s from prometheus", func(s *PerfExperimentSpec) {
			s.Metrics.Interval, s.Windows.Baseline, s.Windows.Treatment = "10s", "2m", "2m"
		}},
		{"window 35m at 5m from prometheus", func(s *PerfExperimentSpec) {
			s.Metrics.Interval, s.Windows.Baseline, s.Windows.Treatment = "5m", "35m", "35m"
		}},
		{"interleaved sub-windows 1m30s at 15s from prometheus", func(s *PerfExperimentSpec) {
			s.Design, s.Interleaving = DesignInterleaved, &InterleavingSpec{Rounds: 4, Order: "abba"}
			s.Metrics.Interval, s.Windows.Baseline, s.Windows.Treatment = "15s", "90s", "90s"
		}},
		{"sweep baseline 1m45s at 15s from prometheus", func(s *PerfExperimentSpec) {
			s.Toggle, s.SuccessCriteria = nil, nil
			s.Metrics.Interval, s.Windows.Baseline, s.Windows.Treatment = "15s", "105s", "105s"
		}},
		{"windows 24h", func(s *PerfExperimentSpec) { s.Windows.Baseline, s.Windows.Treatment = "24h", "24h" }},
		{"metrics.interval 1s", func(s *PerfExperimentSpec) { s.Metrics.Interval = "1s" }},
		{"prometheus source with prometheus", func(s *PerfExperimentSpec) { s.Metrics.Source = MetricsSourcePrometheus }},
		{"metrics-server without prometheus", func(s *PerfExperimentSpec) {
			s.Metrics.Source, s.Metrics.Prometheus = MetricsSourceMetricsServer, nil
		}},
		{"env value toggle", func(s *PerfExperimentSpec) {
			s.Toggle = &ToggleSpec{Env: &EnvToggle{Name: "PROFILING_ENABLED", Value: &value}}
		}},
		{"env empty value toggle", func(s *PerfExperimentSpec) {
			empty := ""
			s.Toggle = &ToggleSpec{Env: &EnvToggle{Name: "PROFILING_ENABLED", Value: &empty}}
		}},
		{"env remove toggle", func(s *PerfExperimentSpec) {
			s.Toggle = &ToggleSpec{Env: &EnvToggle{Name: "JAVA_TOOL_OPTIONS", Remove: true}}
		}},
		{"jvmOption toggle", func(s *PerfExperimentSpec) { s.Toggle = &ToggleSpec{JVMOption: "-XX:+UseSerialGC"} }},
		{"args toggle", func(s *PerfExperimentSpec) { s.Toggle = &ToggleSpec{Args: []string{"--profiling"}} }},
		{"qps bounds", func(s *PerfExperimentSpec) {
			s.Stages = []StageSpec{{QPS: 1}, {QPS: 100000}}
			s.Warmup.QPS = 100000
		}},
		{"percent bounds", func(s *PerfExperimentSpec) {
			s.Guardrails.ErrorRate, s.Guardrails.Heap.MaxUtilization = "0%", "100%"
		}},
		{"rolloutTimeout 10s", func(s *PerfExperimentSpec) { s.Guardrails.RolloutTimeout = "10s" }},
		{"rolloutTimeout 2h", func(s *PerfExperimentSpec) { s.Guardrails.RolloutTimeout = "2h" }},
		{"parallelism 20, weight 1000", func(s *PerfExperimentSpec) {
			s.Load.K6.Parallelism, s.Load.Requests[0].Weight = 20, 1000
		}},
		{"http toggle timeout bounds", func(s *PerfExperimentSpec) { s.Toggle.HTTP.Timeout = "100ms" }},
		{"every k6 pod setting", func(s *PerfExperimentSpec) {
			s.Load.K6.Env = []corev1.EnvVar{{Name: "K6_PROMETHEUS_RW_SERVER_URL", Value: "http://prometheus:9090/api/v1/write"}}
			s.Load.K6.ExtraArgs = []string{"--out", "experimental-prometheus-rw", "--tag", "team=shop"}
			s.Load.K6.NodeSelector = map[string]string{"pool": "load"}
			s.Load.K6.Tolerations = []corev1.Toleration{{Key: "load", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule}}
			s.Load.K6.PodLabels = map[string]string{"sidecar.istio.io/inject": "false"}
			s.Load.K6.PodAnnotations = map[string]string{"sidecar.istio.io/inject": "false"}
			s.Load.K6.ImagePullSecrets = []corev1.LocalObjectReference{{Name: "registry"}}
			s.Load.K6.ServiceAccountName = "k6-runner"
		}},
		{"exec toggle", func(s *PerfExperimentSpec) {
			s.Toggle = &ToggleSpec{Exec: &ExecToggle{Command: []string{"jcmd", "1", "JFR.start"}, Revert: []string{"jcmd", "1", "JFR.stop"}, Timeout: "5m"}}
		}},
		{"interleaved http toggle", func(s *PerfExperimentSpec) {
			s.Design = DesignInterleaved
			s.Interleaving = &InterleavingSpec{Rounds: 6, Order: OrderRandom}
		}},
		{"calibrate", func(s *PerfExperimentSpec) { s.Calibrate = true }},
		{"load-only qps sweep", func(s *PerfExperimentSpec) { s.Toggle, s.SuccessCriteria = nil, nil }},
		{"load-only concurrency sweep", func(s *PerfExperimentSpec) {
			s.Toggle, s.SuccessCriteria = nil, nil
			s.Stages = []StageSpec{{Concurrency: 1}, {Concurrency: 10, Name: "c10"}, {Concurrency: 10000}}
		}},
		{"mixed stages with a toggle", func(s *PerfExperimentSpec) { s.Stages[1] = StageSpec{Concurrency: 50} }},
		{"knee settings", func(s *PerfExperimentSpec) { s.Knee = KneeSpec{RateShortfall: "2.5%", P99Factor: 2} }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			in := profilingOverhead()
			tt.mutate(&in.Spec)
			if errs := in.Validate(); len(errs) > 0 {
				t.Errorf("valid experiment refused: %v", errs.ToAggregate())
			}
		})
	}
}

func TestValidateRefuses(t *testing.T) {
	value := "on"
	tests := []struct {
		name   string
		mutate func(*PerfExperimentSpec)
		// want are the fields of all the errors, in order.
		want []string
		// typ is the type of the first error; Invalid when empty.
		typ field.ErrorType
	}{
		// target
		{name: "interleaved with a toggle that rolls the pods",
			mutate: func(s *PerfExperimentSpec) {
				s.Design = DesignInterleaved
				s.Toggle = &ToggleSpec{JVMOption: "-XX:+UseSerialGC"}
			},
			want: []string{"spec.design"}},
		{name: "unknown design",
			mutate: func(s *PerfExperimentSpec) { s.Design = "crossover" },
			want:   []string{"spec.design"}, typ: field.ErrorTypeNotSupported},
		{name: "interleaving of a sequential run, one round, unknown order",
			mutate: func(s *PerfExperimentSpec) { s.Interleaving = &InterleavingSpec{Rounds: 1, Order: "sorted"} },
			want:   []string{"spec.interleaving", "spec.interleaving.rounds", "spec.interleaving.order"}},
		{name: "deployment not a DNS subdomain",
			mutate: func(s *PerfExperimentSpec) { s.Target.Deployment = "Mall_Gateway" },
			want:   []string{"spec.target.deployment"}},
		{name: "deployment empty",
			mutate: func(s *PerfExperimentSpec) { s.Target.Deployment = "" },
			want:   []string{"spec.target.deployment"}},
		{name: "url not http",
			mutate: func(s *PerfExperimentSpec) { s.Target.URL = "ftp://mall-gateway:8080" },
			want:   []string{"spec.target.url"}},
		{name: "url relative",
			mutate: func(s *PerfExperimentSpec) { s.Target.URL = "mall-gateway:8080" },
			want:   []string{"spec.target.url"}},
		{name: "url without host",
			mutate: func(s *PerfExperimentSpec) { s.Target.URL = "http:///path" },
			want:   []string{"spec.target.url"}},
		{name: "url with query",
			mutate: func(s *PerfExperimentSpec) { s.Target.URL = "http://mall-gateway:8080/?debug=1" },
			want:   []string{"spec.target.url"}},
		{name: "url with fragment",
			mutate: func(s *PerfExperimentSpec) { s.Target.URL = "http://mall-gateway:8080#top" },
			want:   []string{"spec.target.url"}},
		{name: "url missing with requests",
			mutate: func(s *PerfExperimentSpec) { s.Target.URL = "" },
			want:   []string{"spec.target.url"}, typ: field.ErrorTypeRequired},

		// load
		{name: "both requests and scriptRef",
			mutate: func(s *PerfExperimentSpec) { s.Load.ScriptRef = &ScriptRef{Name: "k6", Key: "script.js"} },
			want:   []string{"spec.load"}},
		{name: "neither requests nor scriptRef",
			mutate: func(s *PerfExperimentSpec) { s.Load.Requests = nil },
			want:   []string{"spec.load"}},
		{name: "request path without slash",
			mutate: func(s *PerfExperimentSpec) { s.Load.Requests[0].Path = "case/api" },
			want:   []string{"spec.load.requests[0].path"}},
		{name: "request weight 0",
			mutate: func(s *PerfExperimentSpec) { s.Load.Requests[1].Weight = 0 },
			want:   []string{"spec.load.requests[1].weight"}},
		{name: "request weight 1001",
			mutate: func(s *PerfExperimentSpec) { s.Load.Requests[1].Weight = 1001 },
			want:   []string{"spec.load.requests[1].weight"}},
		{name: "load timeout too short",
			mutate: func(s *PerfExperimentSpec) { s.Load.Timeout = "50ms" },
			want:   []string{"spec.load.timeout"}},
		{name: "load timeout malformed",
			mutate: func(s *PerfExperimentSpec) { s.Load.Timeout = "10 seconds" },
			want:   []string{"spec.load.timeout"}},
		{name: "k6 parallelism 0",
			mutate: func(s *PerfExperimentSpec) { s.Load.K6.Parallelism = 0 },
			want:   []string{"spec.load.k6.parallelism"}},
		{name: "k6 parallelism 21",
			mutate: func(s *PerfExperimentSpec) { s.Load.K6.Parallelism = 21 },
			want:   []string{"spec.load.k6.parallelism"}},
		{name: "k6 env the operator sets",
			mutate: func(s *PerfExperimentSpec) {
				s.Load.K6.Env = []corev1.EnvVar{{Name: "K6_OUT", Value: "x"}, {Name: "PERF_QPS", Value: "9"}}
			},
			want: []string{"spec.load.k6.env[1].name"}},
		{name: "k6 env name invalid",
			mutate: func(s *PerfExperimentSpec) { s.Load.K6.Env = []corev1.EnvVar{{Name: "1X"}} },
			want:   []string{"spec.load.k6.env[0].name"}},
		{name: "k6 env twice",
			mutate: func(s *PerfExperimentSpec) { s.Load.K6.Env = []corev1.EnvVar{{Name: "A"}, {Name: "A"}} },
			want:   []string{"spec.load.k6.env[1].name"}, typ: field.ErrorTypeDuplicate},
		{name: "k6 extra arg the operator sets",
			mutate: func(s *PerfExperimentSpec) { s.Load.K6.ExtraArgs = []string{"--out", "json=/tmp/x", "--vus=50"} },
			want:   []string{"spec.load.k6.extraArgs[2]"}},
		{name: "k6 extra arg hiding the summary",
			mutate: func(s *PerfExperimentSpec) { s.Load.K6.ExtraArgs = []string{"--no-summary"} },
			want:   []string{"spec.load.k6.extraArgs[0]"}},
		{name: "k6 pod label the operator sets",
			mutate: func(s *PerfExperimentSpec) { s.Load.K6.PodLabels = map[string]string{"perfexp.dev/experiment": "x"} },
			want:   []string{"spec.load.k6.podLabels[perfexp.dev/experiment]"}},
		{name: "k6 pod label value invalid",
			mutate: func(s *PerfExperimentSpec) { s.Load.K6.PodLabels = map[string]string{"team": "shop floor"} },
			want:   []string{"spec.load.k6.podLabels[team]"}},
		{name: "k6 node selector key invalid",
			mutate: func(s *PerfExperimentSpec) { s.Load.K6.NodeSelector = map[string]string{"pool name": "load"} },
			want:   []string{"spec.load.k6.nodeSelector[pool name]"}},
		{name: "k6 annotation key invalid",
			mutate: func(s *PerfExperimentSpec) { s.Load.K6.PodAnnotations = map[string]string{"-bad": "x"} },
			want:   []string{"spec.load.k6.podAnnotations[-bad]"}},
		{name: "k6 image pull secret invalid",
			mutate: func(s *PerfExperimentSpec) {
				s.Load.K6.ImagePullSecrets = []corev1.LocalObjectReference{{Name: "Registry_Key"}}
			},
			want: []string{"spec.load.k6.imagePullSecrets[0].name"}},
		{name: "k6 service account invalid",
			mutate: func(s *PerfExperimentSpec) { s.Load.K6.ServiceAccountName = "K6 Runner" },
			want:   []string{"spec.load.k6.serviceAccountName"}},

		// warmup and stages
		{name: "warmup duration 0s",
			mutate: func(s *PerfExperimentSpec) { s.Warmup.Duration = "0s" },
			want:   []string{"spec.warmup.duration"}},
		{name: "warmup duration 25h",
			mutate: func(s *PerfExperimentSpec) { s.Warmup.Duration = "25h" },
			want:   []string{"spec.warmup.duration"}},
		{name: "warmup duration missing",
			mutate: func(s *PerfExperimentSpec) { s.Warmup.Duration = "" },
			want:   []string{"spec.warmup.duration"}},
		{name: "warmup qps 0",
			mutate: func(s *PerfExperimentSpec) { s.Warmup.QPS = 0 },
			want:   []string{"spec.warmup.qps"}},
		{name: "no stages",
			mutate: func(s *PerfExperimentSpec) { s.Stages = nil },
			want:   []string{"spec.stages"}, typ: field.ErrorTypeRequired},
		{name: "stage without qps or concurrency",
			mutate: func(s *PerfExperimentSpec) { s.Stages[1].QPS = 0 },
			want:   []string{"spec.stages[1]"}},
		{name: "stage with both qps and concurrency",
			mutate: func(s *PerfExperimentSpec) { s.Stages[1].Concurrency = 4 },
			want:   []string{"spec.stages[1]"}},
		{name: "stage concurrency 10001",
			mutate: func(s *PerfExperimentSpec) { s.Stages[0] = StageSpec{Concurrency: 10001} },
			want:   []string{"spec.stages[0].concurrency"}},
		{name: "knee p99Factor 1",
			mutate: func(s *PerfExperimentSpec) { s.Knee.P99Factor = 1 },
			want:   []string{"spec.knee.p99Factor"}},
		{name: "knee rateShortfall not a percentage",
			mutate: func(s *PerfExperimentSpec) { s.Knee.RateShortfall = "10" },
			want:   []string{"spec.knee.rateShortfall"}},
		{name: "calibrate without a toggle",
			mutate: func(s *PerfExperimentSpec) { s.Toggle, s.SuccessCriteria, s.Calibrate = nil, nil, true },
			want:   []string{"spec.calibrate"}},
		{name: "success criteria without a toggle",
			mutate: func(s *PerfExperimentSpec) { s.Toggle = nil },
			want:   []string{"spec.successCriteria"}},
		{name: "interleaved without a toggle",
			mutate: func(s *PerfExperimentSpec) { s.Toggle, s.SuccessCriteria, s.Design = nil, nil, DesignInterleaved },
			want:   []string{"spec.design"}},
		{name: "toggle and variants",
			mutate: func(s *PerfExperimentSpec) {
				s.Variants = []ArmSpec{{Name: "serial", Toggle: ToggleSpec{JVMOption: "-XX:+UseSerialGC"}}}
			},
			want: []string{"spec.variants"}},
		{name: "variants of two kinds",
			mutate: func(s *PerfExperimentSpec) {
				s.Toggle = nil
				s.Variants = []ArmSpec{{Name: "serial", Toggle: ToggleSpec{JVMOption: "-XX:+UseSerialGC"}}, {Name: "flag", Toggle: ToggleSpec{Args: []string{"--flag"}}}}
			},
			want: []string{"spec.variants[1].toggle"}},
		{name: "env variants of two variables",
			mutate: func(s *PerfExperimentSpec) {
				s.Toggle = nil
				v := "1"
				s.Variants = []ArmSpec{{Name: "a", Toggle: ToggleSpec{Env: &EnvToggle{Name: "A", Value: &v}}}, {Name: "b", Toggle: ToggleSpec{Env: &EnvToggle{Name: "B", Value: &v}}}}
			},
			want: []string{"spec.variants[1].toggle.env.name"}},
		{name: "variants with the same name",
			mutate: func(s *PerfExperimentSpec) {
				s.Toggle = nil
				s.Variants = []ArmSpec{{Name: "gc", Toggle: ToggleSpec{JVMOption: "-XX:+UseSerialGC"}}, {Name: "gc", Toggle: ToggleSpec{JVMOption: "-XX:+UseParallelGC"}}}
			},
			want: []string{"spec.variants[1].name"}},
		{name: "variant without a name and with two kinds",
			mutate: func(s *PerfExperimentSpec) {
				s.Toggle = nil
				s.Variants = []ArmSpec{{Name: "Serial GC", Toggle: ToggleSpec{JVMOption: "-XX:+UseSerialGC", Args: []string{"x"}}}}
			},
			want: []string{"spec.variants[0].name", "spec.variants[0].toggle"}},
		{name: "six variants",
			mutate: func(s *PerfExperimentSpec) {
				s.Toggle = nil
				for i := range 6 {
					s.Variants = append(s.Variants, ArmSpec{Name: fmt.Sprintf("v%d", i), Toggle: ToggleSpec{JVMOption: "-XX:+UseSerialGC"}})
				}
			},
			want: []string{"spec.variants"}},
		{name: "variants interleaved",
			mutate: func(s *PerfExperimentSpec) {
				s.Toggle, s.Design = nil, DesignInterleaved
				s.Variants = []ArmSpec{{Name: "on", Toggle: ToggleSpec{HTTP: &HTTPToggle{Port: 8081, HTTPRequest: HTTPRequest{Path: "/on"}, Revert: HTTPRequest{Path: "/off"}, Timeout: "5s"}}}}
			},
			want: []string{"spec.design"}},
		{name: "variants calibrate",
			mutate: func(s *PerfExperimentSpec) {
				s.Toggle, s.Calibrate = nil, true
				s.Variants = []ArmSpec{{Name: "serial", Toggle: ToggleSpec{JVMOption: "-XX:+UseSerialGC"}}}
			},
			want: []string{"spec.calibrate"}},
		{name: "stage qps 100001",
			mutate: func(s *PerfExperimentSpec) { s.Stages[2].QPS = 100001 },
			want:   []string{"spec.stages[2].qps"}},

		// metrics and windows
		{name: "metrics interval too short",
			mutate: func(s *PerfExperimentSpec) { s.Metrics.Interval = "500ms" },
			want:   []string{"spec.metrics.interval"}},
		{name: "metrics interval too long",
			mutate: func(s *PerfExperimentSpec) { s.Metrics.Interval = "6m" },
			want:   []string{"spec.metrics.interval"}},
		{name: "metrics interval malformed skips the 4-interval rule",
			mutate: func(s *PerfExperimentSpec) { s.Metrics.Interval = "15" },
			want:   []string{"spec.metrics.interval"}},
		{name: "prometheus source without prometheus",
			mutate: func(s *PerfExperimentSpec) {
				s.Metrics.Source, s.Metrics.Prometheus = MetricsSourcePrometheus, nil
			},
			want: []string{"spec.metrics.prometheus"}, typ: field.ErrorTypeRequired},
		{name: "baseline shorter than 4 metrics intervals",
			mutate: func(s *PerfExperimentSpec) {
				s.Metrics.Source, s.Metrics.Prometheus = MetricsSourceMetricsServer, nil
				s.Metrics.Interval, s.Windows.Baseline = "1m", "3m"
			},
			want: []string{"spec.windows.baseline"}},
		{name: "treatment shorter than 4 metrics intervals",
			mutate: func(s *PerfExperimentSpec) {
				s.Metrics.Source, s.Metrics.Prometheus = MetricsSourceMetricsServer, nil
				s.Metrics.Interval, s.Windows.Treatment = "5m", "19m"
			},
			want: []string{"spec.windows.treatment"}},
		{name: "both windows shorter than 4 metrics intervals",
			mutate: func(s *PerfExperimentSpec) {
				s.Metrics.Source, s.Metrics.Prometheus = MetricsSourceMetricsServer, nil
				s.Metrics.Interval, s.Windows.Baseline, s.Windows.Treatment = "5m", "10m", "10m"
			},
			want: []string{"spec.windows.baseline", "spec.windows.treatment"}},
		// With Prometheus a window one second under MinMeasuredWindow: 2m at
		// 15s keeps 3 samples (internal/engine TestMinMeasuredWindowHoldsItsSamples).
		{name: "baseline 2m at 15s from prometheus",
			mutate: func(s *PerfExperimentSpec) { s.Metrics.Interval, s.Windows.Baseline = "15s", "2m" },
			want:   []string{"spec.windows.baseline"}},
		{name: "treatment 2m29s at 15s from prometheus (auto)",
			mutate: func(s *PerfExperimentSpec) {
				s.Metrics.Source = MetricsSourceAuto
				s.Metrics.Interval, s.Windows.Treatment = "15s", "2m29s"
			},
			want: []string{"spec.windows.treatment"}},
		{name: "interleaved sub-windows 1m at 15s from prometheus",
			mutate: func(s *PerfExperimentSpec) {
				s.Design, s.Interleaving = DesignInterleaved, &InterleavingSpec{Rounds: 4, Order: "abba"}
				s.Metrics.Interval, s.Windows.Baseline, s.Windows.Treatment = "15s", "1m", "89s"
			},
			want: []string{"spec.windows.baseline", "spec.windows.treatment"}},
		{name: "baseline under 20s is also under 4 intervals",
			mutate: func(s *PerfExperimentSpec) { s.Windows.Baseline = "10s" },
			want:   []string{"spec.windows.baseline", "spec.windows.baseline"}},
		{name: "baseline over 24h",
			mutate: func(s *PerfExperimentSpec) { s.Windows.Baseline = "25h" },
			want:   []string{"spec.windows.baseline"}},
		{name: "treatment malformed",
			mutate: func(s *PerfExperimentSpec) { s.Windows.Treatment = "30 minutes" },
			want:   []string{"spec.windows.treatment"}},
		{name: "settle over 1h",
			mutate: func(s *PerfExperimentSpec) { s.Windows.Settle = "61m" },
			want:   []string{"spec.windows.settle"}},
		{name: "settle negative",
			mutate: func(s *PerfExperimentSpec) { s.Windows.Settle = "-1m" },
			want:   []string{"spec.windows.settle"}},
		{name: "settle 0 without unit (refused by the CRD too)",
			mutate: func(s *PerfExperimentSpec) { s.Windows.Settle = "0" },
			want:   []string{"spec.windows.settle"}},

		// toggle
		{name: "no toggle kind",
			mutate: func(s *PerfExperimentSpec) { s.Toggle = &ToggleSpec{} },
			want:   []string{"spec.toggle"}},
		{name: "two toggle kinds: http and env",
			mutate: func(s *PerfExperimentSpec) { s.Toggle.Env = &EnvToggle{Name: "PROFILING", Value: &value} },
			want:   []string{"spec.toggle"}},
		{name: "two toggle kinds: jvmOption and args",
			mutate: func(s *PerfExperimentSpec) {
				s.Toggle = &ToggleSpec{JVMOption: "-Xint", Args: []string{"--x"}}
			},
			want: []string{"spec.toggle"}},
		{name: "all toggle kinds",
			mutate: func(s *PerfExperimentSpec) {
				s.Toggle.Env = &EnvToggle{Name: "PROFILING", Remove: true}
				s.Toggle.JVMOption = "-Xint"
				s.Toggle.Args = []string{"--x"}
			},
			want: []string{"spec.toggle"}},
		{name: "env with both value and remove",
			mutate: func(s *PerfExperimentSpec) {
				s.Toggle = &ToggleSpec{Env: &EnvToggle{Name: "PROFILING", Value: &value, Remove: true}}
			},
			want: []string{"spec.toggle.env"}},
		{name: "env with neither value nor remove",
			mutate: func(s *PerfExperimentSpec) { s.Toggle = &ToggleSpec{Env: &EnvToggle{Name: "PROFILING"}} },
			want:   []string{"spec.toggle.env"}},
		{name: "env name starting with a digit",
			mutate: func(s *PerfExperimentSpec) {
				s.Toggle = &ToggleSpec{Env: &EnvToggle{Name: "1PROFILING", Value: &value}}
			},
			want: []string{"spec.toggle.env.name"}},
		{name: "env name empty",
			mutate: func(s *PerfExperimentSpec) { s.Toggle = &ToggleSpec{Env: &EnvToggle{Name: "", Remove: true}} },
			want:   []string{"spec.toggle.env.name"}},
		{name: "jvmOption without dash",
			mutate: func(s *PerfExperimentSpec) { s.Toggle = &ToggleSpec{JVMOption: "XX:+UseSerialGC"} },
			want:   []string{"spec.toggle.jvmOption"}},
		{name: "http port 0",
			mutate: func(s *PerfExperimentSpec) { s.Toggle.HTTP.Port = 0 },
			want:   []string{"spec.toggle.http.port"}},
		{name: "http port 65536",
			mutate: func(s *PerfExperimentSpec) { s.Toggle.HTTP.Port = 65536 },
			want:   []string{"spec.toggle.http.port"}},
		{name: "http path without slash",
			mutate: func(s *PerfExperimentSpec) { s.Toggle.HTTP.Path = "admin/profiling" },
			want:   []string{"spec.toggle.http.path"}},
		{name: "http revert path without slash",
			mutate: func(s *PerfExperimentSpec) { s.Toggle.HTTP.Revert.Path = "admin/profiling" },
			want:   []string{"spec.toggle.http.revert.path"}},
		{name: "http timeout over 1m",
			mutate: func(s *PerfExperimentSpec) { s.Toggle.HTTP.Timeout = "2m" },
			want:   []string{"spec.toggle.http.timeout"}},
		{name: "http timeout under 100ms",
			mutate: func(s *PerfExperimentSpec) { s.Toggle.HTTP.Timeout = "99ms" },
			want:   []string{"spec.toggle.http.timeout"}},

		{name: "exec and http",
			mutate: func(s *PerfExperimentSpec) {
				s.Toggle.Exec = &ExecToggle{Command: []string{"true"}, Revert: []string{"true"}}
			},
			want: []string{"spec.toggle"}},
		{name: "exec without command",
			mutate: func(s *PerfExperimentSpec) {
				s.Toggle = &ToggleSpec{Exec: &ExecToggle{Revert: []string{"true"}, Timeout: "30s"}}
			},
			want: []string{"spec.toggle.exec.command"}},
		{name: "exec without revert",
			mutate: func(s *PerfExperimentSpec) {
				s.Toggle = &ToggleSpec{Exec: &ExecToggle{Command: []string{"true"}, Timeout: "30s"}}
			},
			want: []string{"spec.toggle.exec.revert"}},
		{name: "exec timeout under 1s",
			mutate: func(s *PerfExperimentSpec) {
				s.Toggle = &ToggleSpec{Exec: &ExecToggle{Command: []string{"true"}, Revert: []string{"true"}, Timeout: "500ms"}}
			},
			want: []string{"spec.toggle.exec.timeout"}},

		// guardrails
		{name: "errorRate over 100%",
			mutate: func(s *PerfExperimentSpec) { s.Guardrails.ErrorRate = "150%" },
			want:   []string{"spec.guardrails.errorRate"}},
		{name: "errorRate NaN",
			mutate: func(s *PerfExperimentSpec) { s.Guardrails.ErrorRate = "NaN%" },
			want:   []string{"spec.guardrails.errorRate"}},
		{name: "errorRate without percent sign",
			mutate: func(s *PerfExperimentSpec) { s.Guardrails.ErrorRate = "0.05" },
			want:   []string{"spec.guardrails.errorRate"}},
		{name: "heap maxUtilization malformed",
			mutate: func(s *PerfExperimentSpec) { s.Guardrails.Heap.MaxUtilization = "ninety%" },
			want:   []string{"spec.guardrails.heap.maxUtilization"}},
		{name: "heap maxGrowthPerMinute zero",
			mutate: func(s *PerfExperimentSpec) { s.Guardrails.Heap.MaxGrowthPerMinute = quantity("0") },
			want:   []string{"spec.guardrails.heap.maxGrowthPerMinute"}},
		{name: "heap maxGrowthPerMinute negative",
			mutate: func(s *PerfExperimentSpec) { s.Guardrails.Heap.MaxGrowthPerMinute = quantity("-10Mi") },
			want:   []string{"spec.guardrails.heap.maxGrowthPerMinute"}},
		{name: "heap consecutiveBreaches 0",
			mutate: func(s *PerfExperimentSpec) { s.Guardrails.Heap.ConsecutiveBreaches = 0 },
			want:   []string{"spec.guardrails.heap.consecutiveBreaches"}},
		{name: "heap consecutiveBreaches 21",
			mutate: func(s *PerfExperimentSpec) { s.Guardrails.Heap.ConsecutiveBreaches = 21 },
			want:   []string{"spec.guardrails.heap.consecutiveBreaches"}},
		{name: "rolloutTimeout under 10s",
			mutate: func(s *PerfExperimentSpec) { s.Guardrails.RolloutTimeout = "5s" },
			want:   []string{"spec.guardrails.rolloutTimeout"}},
		{name: "rolloutTimeout over 2h",
			mutate: func(s *PerfExperimentSpec) { s.Guardrails.RolloutTimeout = "3h" },
			want:   []string{"spec.guardrails.rolloutTimeout"}},

		// successCriteria
		{name: "maxCPUOverhead without percent sign",
			mutate: func(s *PerfExperimentSpec) { s.SuccessCriteria.MaxCPUOverhead = "5" },
			want:   []string{"spec.successCriteria.maxCPUOverhead"}},
		{name: "maxMemoryOverhead negative",
			mutate: func(s *PerfExperimentSpec) { s.SuccessCriteria.MaxMemoryOverhead = "-5%" },
			want:   []string{"spec.successCriteria.maxMemoryOverhead"}},
		{name: "maxP99Overhead over 100%",
			mutate: func(s *PerfExperimentSpec) { s.SuccessCriteria.MaxP99Overhead = "101%" },
			want:   []string{"spec.successCriteria.maxP99Overhead"}},

		// several errors are all reported, in field order
		{name: "several fields at once",
			mutate: func(s *PerfExperimentSpec) {
				s.Target.Deployment = "UPPER"
				s.Stages[0].QPS = 0
				s.Toggle.HTTP.Port = 0
				s.Guardrails.ErrorRate = "x"
			},
			want: []string{"spec.target.deployment", "spec.stages[0]", "spec.toggle.http.port", "spec.guardrails.errorRate"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			in := profilingOverhead()
			tt.mutate(&in.Spec)
			errs := in.Validate()
			got := make([]string, len(errs))
			for i, e := range errs {
				got[i] = e.Field
			}
			if !slices.Equal(got, tt.want) {
				t.Fatalf("error fields = %q, want %q; errors: %v", got, tt.want, errs.ToAggregate())
			}
			typ := tt.typ
			if typ == "" {
				typ = field.ErrorTypeInvalid
			}
			if errs[0].Type != typ {
				t.Errorf("error type = %q, want %q", errs[0].Type, typ)
			}
			if errs[0].Detail == "" {
				t.Errorf("error %q has no detail", errs[0].Field)
			}
		})
	}
}
