package crd

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"perfexp.dev/perf-operator/internal/testenv"
)

// loadManifest reads a YAML manifest into an unstructured object.
func loadManifest(t *testing.T, path string) *unstructured.Unstructured {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := yaml.Unmarshal(b, &m); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return &unstructured.Unstructured{Object: m}
}

// base is a valid experiment every invalid case starts from: the seed report's.
func base(t *testing.T) *unstructured.Unstructured {
	u := loadManifest(t, filepath.Join(testenv.RepoRoot(), "examples", "profiling-overhead.yaml"))
	u.SetNamespace("default")
	return u
}

// edit is one change to the base manifest's spec: set a value, or delete it when
// value is del. Paths are dotted; numbers index lists ("stages.0.qps").
type edit struct {
	path  string
	value any
}

var del = struct{}{}

func apply(t *testing.T, obj map[string]any, e edit) {
	t.Helper()
	parts := strings.Split("spec."+e.path, ".")
	var cur any = obj
	for i, p := range parts {
		last := i == len(parts)-1
		switch c := cur.(type) {
		case map[string]any:
			if last {
				if e.value == del {
					delete(c, p)
				} else {
					c[p] = e.value
				}
				return
			}
			if _, ok := c[p]; !ok {
				c[p] = map[string]any{}
			}
			cur = c[p]
		case []any:
			n, err := strconv.Atoi(p)
			if err != nil || n >= len(c) {
				t.Fatalf("bad path %q", e.path)
			}
			if last {
				c[n] = e.value
				return
			}
			cur = c[n]
		default:
			t.Fatalf("bad path %q at %q", e.path, p)
		}
	}
}

// invalidCases are manifests `kubectl apply` must refuse. field is the path the
// error must name; message is a fragment of what it must say is allowed.
var invalidCases = []struct {
	name    string
	edits   []edit
	field   string
	message string
}{
	{"no target", []edit{{"target", del}}, "spec.target", "Required value"},
	{"no deployment", []edit{{"target.deployment", del}}, "spec.target.deployment", "Required value"},
	{"deployment not a DNS name", []edit{{"target.deployment", "Mall_Gateway"}}, "spec.target.deployment", "must be a Deployment name"},
	{"deployment in another namespace", []edit{{"target.deployment", "other/mall-gateway"}}, "spec.target.deployment", "no namespace prefix"},
	{"container not a DNS label", []edit{{"target.container", "App"}}, "spec.target.container", "must be a container name"},
	{"url not http", []edit{{"target.url", "ftp://mall-gateway:21"}}, "spec.target.url", "http:// or https://"},
	{"url missing with generated requests", []edit{{"target.url", del}}, "spec.target.url", "target.url is required when load.requests"},
	{"both requests and scriptRef", []edit{{"load.scriptRef", map[string]any{"name": "load"}}}, "spec.load", "exactly one of load.requests"},
	{"neither requests nor scriptRef", []edit{{"load.requests", del}}, "spec.load", "exactly one of load.requests"},
	{"empty request list", []edit{{"load.requests", []any{}}}, "spec.load.requests", "at least 1 item"},
	{"request path without slash", []edit{{"load.requests.0.path", "case/api"}}, "spec.load.requests[0].path", "must start with /"},
	{"request weight 0", []edit{{"load.requests.1.weight", 0}}, "spec.load.requests[1].weight", "greater than or equal to 1"},
	{"request method unknown", []edit{{"load.requests.0.method", "FETCH"}}, "spec.load.requests[0].method", "supported values"},
	{"header name with space", []edit{{"load.requests.0.headers", []any{map[string]any{"name": "X Source", "value": "k6"}}}}, "spec.load.requests[0].headers[0].name", "must be an HTTP header name"},
	{"scriptRef without name", []edit{{"load.requests", del}, {"load.scriptRef", map[string]any{"key": "a.js"}}}, "spec.load.scriptRef.name", "Required value"},
	{"k6 parallelism 0", []edit{{"load.k6.parallelism", 0}}, "spec.load.k6.parallelism", "greater than or equal to 1"},
	{"k6 parallelism too high", []edit{{"load.k6.parallelism", 100}}, "spec.load.k6.parallelism", "less than or equal to 20"},
	{"k6 env the operator sets", []edit{{"load.k6.env", []any{map[string]any{"name": "PERF_QPS", "value": "1"}}}}, "spec.load.k6.env", "must not set a variable the operator sets"},
	{"k6 env twice", []edit{{"load.k6.env", []any{map[string]any{"name": "A", "value": "1"}, map[string]any{"name": "A", "value": "2"}}}}, "spec.load.k6.env[1]", "Duplicate value"},
	{"k6 extra arg the operator sets", []edit{{"load.k6.extraArgs", []any{"--out", "json=/tmp/o.json", "--duration=1h"}}}, "spec.load.k6.extraArgs", "must not set a flag the operator sets"},
	{"k6 pod label the operator sets", []edit{{"load.k6.podLabels", map[string]any{"perfexp.dev/experiment": "other"}}}, "spec.load.k6.podLabels", "must not set a label the operator"},
	{"k6 node selector a list", []edit{{"load.k6.nodeSelector", []any{"pool=load"}}}, "spec.load.k6.nodeSelector", "must be of type object"},
	{"k6 toleration misspelled", []edit{{"load.k6.tolerations", []any{map[string]any{"key": "load", "efect": "NoSchedule"}}}}, "spec.load.k6.tolerations[0].efect", "unknown field"},
	{"k6 image pull secret without name", []edit{{"load.k6.imagePullSecrets", []any{map[string]any{"nam": "registry"}}}}, "spec.load.k6.imagePullSecrets[0].nam", "unknown field"},
	{"k6 service account not a name", []edit{{"load.k6.serviceAccountName", "K6 Runner"}}, "spec.load.k6.serviceAccountName", "must be a ServiceAccount name"},
	{"k6 affinity not an object", []edit{{"load.k6.affinity", "anywhere"}}, "spec.load.k6.affinity", "must be of type object"},
	{"load timeout not a duration", []edit{{"load.timeout", "10 seconds"}}, "spec.load.timeout", "must be a duration such as 30s"},
	{"no stages", []edit{{"stages", del}}, "spec.stages", "Required value"},
	{"empty stages", []edit{{"stages", []any{}}}, "spec.stages", "at least 1 item"},
	{"stage qps 0", []edit{{"stages.0.qps", 0}}, "spec.stages[0].qps", "greater than or equal to 1"},
	{"stage without qps or concurrency", []edit{{"stages.0.qps", del}}, "spec.stages[0]", "set exactly one of qps (an arrival rate) or concurrency"},
	{"stage with qps and concurrency", []edit{{"stages.1.concurrency", 10}}, "spec.stages[1]", "set exactly one of qps (an arrival rate) or concurrency"},
	{"stage concurrency too high", []edit{{"stages.0.qps", del}, {"stages.0.concurrency", 20000}}, "spec.stages[0].concurrency", "less than or equal to 10000"},
	{"knee p99Factor 1", []edit{{"knee", map[string]any{"p99Factor": 1}}}, "spec.knee.p99Factor", "greater than or equal to 2"},
	{"knee rateShortfall not a percentage", []edit{{"knee", map[string]any{"rateShortfall": "10"}}}, "spec.knee.rateShortfall", "must be a percentage"},
	{"stage qps too high", []edit{{"stages.1.qps", 1000000}}, "spec.stages[1].qps", "less than or equal to 100000"},
	{"stage qps a string", []edit{{"stages.2.qps", "fast"}}, "spec.stages[2].qps", "must be of type integer"},
	{"stage name not a label", []edit{{"stages.0.name", "Peak Load"}}, "spec.stages[0].name", "lower-case DNS label"},
	{"warm-up negative duration", []edit{{"warmup.duration", "-5m"}}, "spec.warmup.duration", "must be a duration such as 30s"},
	{"warm-up without qps", []edit{{"warmup.qps", del}}, "spec.warmup.qps", "Required value"},
	{"baseline too short", []edit{{"windows.baseline", "10s"}}, "spec.windows.baseline", "must be between 20s and 24h"},
	// A number too large for a Go duration is refused by its format, naming the
	// field, not by an overflow inside a rule's evaluation.
	{"baseline overflows", []edit{{"windows.baseline", "99999999999999h"}}, "spec.windows.baseline", "at most 6 digits a number"},
	{"revert timeout overflows", []edit{{"guardrails.revertTimeout", "9223372036854775807ns"}}, "spec.guardrails.revertTimeout", "at most 6 digits a number"},
	{"treatment not a duration", []edit{{"windows.treatment", "half an hour"}}, "spec.windows.treatment", "must be a duration such as 30s"},
	{"settle too long", []edit{{"windows.settle", "2h"}}, "spec.windows.settle", "must be between 0s and 1h"},
	{"baseline under 4 samples", []edit{{"windows.baseline", "1m"}, {"metrics.interval", "30s"}}, "spec.windows.baseline", "at least 4 metrics.interval"},
	{"treatment under 4 samples", []edit{{"windows.treatment", "50s"}, {"metrics.interval", "15s"}}, "spec.windows.treatment", "at least 4 metrics.interval"},
	// With Prometheus (the base sets it) a sample's CPU is a rate over at
	// least 1m and counts only once that minute lies inside the window after
	// its first interval: 2m at 15s keeps 3 samples, 4 are needed
	// (v1alpha1.MinMeasuredWindow; TestMinMeasuredWindowIsTheCRDs checks the
	// bound to the second).
	{"baseline under 4 samples with prometheus", []edit{{"windows.baseline", "2m"}, {"metrics.interval", "15s"}}, "spec.windows.baseline", "the CPU rate's range"},
	{"interleaved sub-window under its rate range", []edit{{"design", "interleaved"}, {"windows.baseline", "90s"}, {"windows.treatment", "1m"}, {"metrics.interval", "15s"}},
		"spec.windows.treatment", "the CPU rate's range"},
	{"no toggle but success criteria", []edit{{"toggle", del}}, "spec.successCriteria", "success criteria are a toggle's overheads"},
	{"no toggle but calibrate", []edit{{"toggle", del}, {"successCriteria", del}, {"calibrate", true}}, "spec.calibrate", "an A/A calibration measures one toggle's two arms"},
	{"no toggle but interleaved", []edit{{"toggle", del}, {"successCriteria", del}, {"design", "interleaved"}}, "spec.design", "needs a runtime toggle (http or exec)"},
	{"interleaved with a toggle that rolls the pods", []edit{{"design", "interleaved"}, {"toggle", map[string]any{"jvmOption": "-XX:+UseSerialGC"}}}, "spec.design", "needs a runtime toggle (http or exec)"},
	{"toggle and variants", []edit{{"variants", []any{jvmVariant("serial", "-XX:+UseSerialGC")}}}, "spec.variants", "set either toggle"},
	{"variants of two kinds", []edit{{"toggle", del}, {"variants", []any{jvmVariant("serial", "-XX:+UseSerialGC"), map[string]any{"name": "flag", "toggle": map[string]any{"args": []any{"--flag"}}}}}},
		"spec.variants", "every variant must use the same toggle kind"},
	{"env variants of two variables", []edit{{"toggle", del}, {"variants", []any{
		map[string]any{"name": "a", "toggle": map[string]any{"env": map[string]any{"name": "A", "value": "1"}}},
		map[string]any{"name": "b", "toggle": map[string]any{"env": map[string]any{"name": "B", "value": "1"}}}}}},
		"spec.variants", "every env variant must set the same variable"},
	{"variants with one name", []edit{{"toggle", del}, {"variants", []any{jvmVariant("gc", "-XX:+UseSerialGC"), jvmVariant("gc", "-XX:+UseParallelGC")}}}, "spec.variants[1]", "Duplicate value"},
	{"variant name not a label", []edit{{"toggle", del}, {"variants", []any{jvmVariant("Serial GC", "-XX:+UseSerialGC")}}}, "spec.variants[0].name", "lower-case DNS label"},
	{"variant without a toggle", []edit{{"toggle", del}, {"variants", []any{map[string]any{"name": "a"}}}}, "spec.variants[0].toggle", "Required value"},
	{"variant with two toggle kinds", []edit{{"toggle", del}, {"variants", []any{map[string]any{"name": "a", "toggle": map[string]any{"jvmOption": "-XX:+UseSerialGC", "args": []any{"x"}}}}}}, "spec.variants[0].toggle", "exactly one toggle kind"},
	{"six variants", []edit{{"toggle", del}, {"variants", []any{jvmVariant("a", "-Xa"), jvmVariant("b", "-Xb"), jvmVariant("c", "-Xc"), jvmVariant("d", "-Xd"), jvmVariant("e", "-Xe"), jvmVariant("f", "-Xf")}}}, "spec.variants", "must have at most 5 items"},
	{"variants interleaved", []edit{{"toggle", del}, {"design", "interleaved"}, {"variants", []any{jvmVariant("serial", "-XX:+UseSerialGC")}}}, "spec.design", "variants run one after the other"},
	{"variants calibrate", []edit{{"toggle", del}, {"calibrate", true}, {"variants", []any{jvmVariant("serial", "-XX:+UseSerialGC")}}}, "spec.calibrate", "an A/A calibration measures one toggle's two arms"},
	{"unknown design", []edit{{"design", "crossover"}}, "spec.design", "Unsupported value"},
	{"interleaving without design interleaved", []edit{{"interleaving", map[string]any{"rounds": 4}}}, "spec.interleaving", "only used with design interleaved"},
	{"one round", []edit{{"design", "interleaved"}, {"interleaving", map[string]any{"rounds": 1}}}, "spec.interleaving.rounds", "greater than or equal to 2"},
	{"unknown order", []edit{{"design", "interleaved"}, {"interleaving", map[string]any{"order": "sorted"}}}, "spec.interleaving.order", "Unsupported value"},
	{"empty toggle", []edit{{"toggle", map[string]any{}}}, "spec.toggle", "exactly one toggle kind"},
	{"two toggle kinds", []edit{{"toggle.env", map[string]any{"name": "PROFILING", "value": "on"}}}, "spec.toggle", "exactly one toggle kind"},
	{"env with neither value nor remove", []edit{{"toggle", map[string]any{"env": map[string]any{"name": "PROFILING"}}}}, "spec.toggle.env", "exactly one of value"},
	{"env with value and remove", []edit{{"toggle", map[string]any{"env": map[string]any{"name": "P", "value": "1", "remove": true}}}}, "spec.toggle.env", "exactly one of value"},
	{"env name starting with a digit", []edit{{"toggle", map[string]any{"env": map[string]any{"name": "1PROFILING", "value": "on"}}}}, "spec.toggle.env.name", "environment variable name"},
	{"jvm option without dash", []edit{{"toggle", map[string]any{"jvmOption": "UseSerialGC"}}}, "spec.toggle.jvmOption", "starting with '-'"},
	{"empty args", []edit{{"toggle", map[string]any{"args": []any{}}}}, "spec.toggle.args", "at least 1 item"},
	{"http without revert", []edit{{"toggle.http.revert", del}}, "spec.toggle.http.revert", "Required value"},
	{"exec without revert", []edit{{"toggle", map[string]any{"exec": map[string]any{"command": []any{"jcmd", "1", "JFR.start"}}}}}, "spec.toggle.exec.revert", "Required value"},
	{"exec with an empty command", []edit{{"toggle", map[string]any{"exec": map[string]any{"command": []any{}, "revert": []any{"true"}}}}}, "spec.toggle.exec.command", "at least 1 item"},
	{"exec timeout too long", []edit{{"toggle", map[string]any{"exec": map[string]any{"command": []any{"true"}, "revert": []any{"true"}, "timeout": "10m"}}}}, "spec.toggle.exec.timeout", "must be between 1s and 5m"},
	{"exec beside http", []edit{{"toggle.exec", map[string]any{"command": []any{"true"}, "revert": []any{"true"}}}}, "spec.toggle", "exactly one toggle kind"},
	{"http without port", []edit{{"toggle.http.port", del}}, "spec.toggle.http.port", "Required value"},
	{"http port out of range", []edit{{"toggle.http.port", 70000}}, "spec.toggle.http.port", "less than or equal to 65535"},
	{"http path without slash", []edit{{"toggle.http.path", "admin/profiling"}}, "spec.toggle.http.path", "must start with /"},
	{"http revert path without slash", []edit{{"toggle.http.revert.path", "admin"}}, "spec.toggle.http.revert.path", "must start with /"},
	{"http scheme unknown", []edit{{"toggle.http.scheme", "ftp"}}, "spec.toggle.http.scheme", "supported values"},
	{"http timeout too long", []edit{{"toggle.http.timeout", "5m"}}, "spec.toggle.http.timeout", "must be between 100ms and 1m"},
	{"metrics source unknown", []edit{{"metrics.source", "datadog"}}, "spec.metrics.source", "supported values"},
	{"prometheus source without url", []edit{{"metrics.source", "prometheus"}, {"metrics.prometheus", del}}, "spec.metrics.prometheus", "metrics.prometheus.url is required"},
	{"prometheus url not a URL", []edit{{"metrics.prometheus.url", "prometheus:9090"}}, "spec.metrics.prometheus.url", "http:// or https://"},
	{"metrics interval zero", []edit{{"metrics.interval", "0s"}}, "spec.metrics.interval", "must be between 1s and 5m"},
	{"error rate over 100%", []edit{{"guardrails.errorRate", "150%"}}, "spec.guardrails.errorRate", "percentage from 0% to 100%"},
	{"error rate without %", []edit{{"guardrails.errorRate", "5"}}, "spec.guardrails.errorRate", "percentage from 0% to 100%"},
	{"max utilization negative", []edit{{"guardrails.heap.maxUtilization", "-1%"}}, "spec.guardrails.heap.maxUtilization", "percentage from 0% to 100%"},
	{"heap growth zero", []edit{{"guardrails.heap.maxGrowthPerMinute", "0"}}, "spec.guardrails.heap.maxGrowthPerMinute", "positive quantity"},
	{"heap growth not a quantity", []edit{{"guardrails.heap.maxGrowthPerMinute", "100Mi/min"}}, "spec.guardrails.heap.maxGrowthPerMinute", "should match"},
	{"consecutive breaches 0", []edit{{"guardrails.heap.consecutiveBreaches", 0}}, "spec.guardrails.heap.consecutiveBreaches", "greater than or equal to 1"},
	{"negative restarts", []edit{{"guardrails.maxRestarts", -1}}, "spec.guardrails.maxRestarts", "greater than or equal to 0"},
	{"rollout timeout too short", []edit{{"guardrails.rolloutTimeout", "1s"}}, "spec.guardrails.rolloutTimeout", "must be between 10s and 2h"},
	{"empty success criteria", []edit{{"successCriteria", map[string]any{}}}, "spec.successCriteria", "at least 1 properties"},
	{"cpu criterion in words", []edit{{"successCriteria.maxCPUOverhead", "five percent"}}, "spec.successCriteria.maxCPUOverhead", "percentage from 0% to 100%"},
	{"cleanup policy unknown", []edit{{"cleanup.jobs", "Archive"}}, "spec.cleanup.jobs", "supported values"},
	{"abort not a boolean", []edit{{"abort", "yes"}}, "spec.abort", "must be of type boolean"},
	{"name longer than a label", []edit{{"__name", strings.Repeat("x", 64)}}, "metadata.name", "must be at most 63 characters"},
	{"misspelled field", []edit{{"toogle", map[string]any{}}}, "spec.toogle", "unknown field"},
}

func jvmVariant(name, option string) map[string]any {
	return map[string]any{"name": name, "toggle": map[string]any{"jvmOption": option}}
}

func TestInvalidManifestsAreRefusedNamingTheField(t *testing.T) {
	if len(invalidCases) < 30 {
		t.Fatalf("the table must hold at least 30 invalid manifests, has %d", len(invalidCases))
	}
	for _, tc := range invalidCases {
		t.Run(tc.name, func(t *testing.T) {
			u := base(t)
			u.SetName("invalid")
			for _, e := range tc.edits {
				if e.path == "__name" {
					u.SetName(e.value.(string))
					continue
				}
				apply(t, u.Object, e)
			}
			// Strict field validation and a server-side dry run are what
			// `kubectl apply --dry-run=server` does; nothing is stored.
			err := k8s.Create(context.Background(), u, client.DryRunAll, client.FieldValidation("Strict"))
			if err == nil {
				t.Fatalf("manifest was accepted; want it refused naming %s", tc.field)
			}
			if !apierrors.IsInvalid(err) && !apierrors.IsBadRequest(err) {
				t.Fatalf("want an Invalid or BadRequest error, got %v", err)
			}
			msg := err.Error()
			t.Log(msg)
			if !strings.Contains(msg, tc.field) {
				t.Errorf("error does not name field %s:\n%s", tc.field, msg)
			}
			if !strings.Contains(msg, tc.message) {
				t.Errorf("error does not say %q:\n%s", tc.message, msg)
			}
		})
	}
}

// examples lists the PerfExperiment manifests under examples/ (the field stories)
// and examples/local/ (the same stories on the toy app, for a local cluster).
func examples(t *testing.T) []string {
	t.Helper()
	var out []string
	for _, dir := range []string{"examples", filepath.Join("examples", "local")} {
		files, _ := filepath.Glob(filepath.Join(testenv.RepoRoot(), dir, "*.yaml"))
		if len(files) == 0 {
			t.Fatalf("no examples in %s", dir)
		}
		for _, f := range files {
			if b, err := os.ReadFile(f); err == nil && strings.Contains(string(b), "\nkind: PerfExperiment\n") {
				out = append(out, f)
			}
		}
	}
	return out
}

// exampleName is an example's path below examples/.
func exampleName(f string) string {
	rel, err := filepath.Rel(filepath.Join(testenv.RepoRoot(), "examples"), f)
	if err != nil || strings.HasPrefix(rel, "..") {
		return filepath.Base(f)
	}
	return rel
}

func TestExamplesAreAccepted(t *testing.T) {
	for _, f := range examples(t) {
		t.Run(exampleName(f), func(t *testing.T) {
			u := loadManifest(t, f)
			u.SetNamespace("default")
			if err := k8s.Create(context.Background(), u, client.DryRunAll, client.FieldValidation("Strict")); err != nil {
				t.Fatalf("example refused: %v", err)
			}
		})
	}
}

// The local examples' target (Namespace, Deployment, Service) is valid too: every
// other document under examples/local is created with a server-side dry run in its
// own namespace, with strict field validation.
func TestLocalExampleTargetsAreAccepted(t *testing.T) {
	files, _ := filepath.Glob(filepath.Join(testenv.RepoRoot(), "examples", "local", "*.yaml"))
	ctx := context.Background()
	seen := 0
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for i, doc := range strings.Split(string(b), "\n---\n") {
			var m map[string]any
			if err := yaml.Unmarshal([]byte(doc), &m); err != nil {
				t.Fatalf("%s document %d: %v", exampleName(f), i, err)
			}
			u := &unstructured.Unstructured{Object: m}
			if len(m) == 0 || u.GetKind() == "PerfExperiment" {
				continue
			}
			seen++
			if ns := u.GetNamespace(); ns != "" {
				nsObj := &unstructured.Unstructured{}
				nsObj.SetAPIVersion("v1")
				nsObj.SetKind("Namespace")
				nsObj.SetName(ns)
				if err := k8s.Create(ctx, nsObj); err != nil && !apierrors.IsAlreadyExists(err) {
					t.Fatal(err)
				}
			}
			err := k8s.Create(ctx, u, client.DryRunAll, client.FieldValidation("Strict"))
			if u.GetKind() == "Namespace" && apierrors.IsAlreadyExists(err) {
				err = nil // each target file carries the namespace its objects were created in
			}
			if err != nil {
				t.Errorf("%s: %s %s refused: %v", exampleName(f), u.GetKind(), u.GetName(), err)
			}
		}
	}
	if seen < 3 {
		t.Fatalf("found %d target objects in examples/local; want the Namespace, Deployment and Service", seen)
	}
}

// Every k6 pod setting together is accepted, and the apiserver keeps each one
// (the schemaless affinity included: nothing is pruned).
func TestK6PodSettingsAreAccepted(t *testing.T) {
	u := base(t)
	u.SetName("k6-settings")
	k6 := map[string]any{
		"env":                []any{map[string]any{"name": "K6_PROMETHEUS_RW_SERVER_URL", "value": "http://prometheus:9090/api/v1/write"}, map[string]any{"name": "TOKEN", "valueFrom": map[string]any{"secretKeyRef": map[string]any{"name": "k6", "key": "token"}}}},
		"extraArgs":          []any{"--out", "experimental-prometheus-rw", "--tag", "team=shop"},
		"nodeSelector":       map[string]any{"pool": "load"},
		"tolerations":        []any{map[string]any{"key": "load", "operator": "Exists", "effect": "NoSchedule"}},
		"affinity":           map[string]any{"nodeAffinity": map[string]any{"requiredDuringSchedulingIgnoredDuringExecution": map[string]any{"nodeSelectorTerms": []any{map[string]any{"matchExpressions": []any{map[string]any{"key": "pool", "operator": "In", "values": []any{"load"}}}}}}}},
		"podLabels":          map[string]any{"sidecar.istio.io/inject": "false"},
		"podAnnotations":     map[string]any{"sidecar.istio.io/inject": "false"},
		"imagePullSecrets":   []any{map[string]any{"name": "registry"}},
		"serviceAccountName": "k6-runner",
	}
	for k, v := range k6 {
		apply(t, u.Object, edit{"load.k6." + k, v})
	}
	if err := k8s.Create(context.Background(), u, client.DryRunAll, client.FieldValidation("Strict")); err != nil {
		t.Fatal(err)
	}
	got, _, _ := unstructured.NestedMap(u.Object, "spec", "load", "k6")
	for k := range k6 {
		if _, ok := got[k]; !ok {
			t.Errorf("spec.load.k6.%s was dropped", k)
		}
	}
	if _, ok, _ := unstructured.NestedMap(u.Object, "spec", "load", "k6", "affinity", "nodeAffinity"); !ok {
		t.Errorf("affinity was pruned: %v", got["affinity"])
	}
}
