package crd

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	apiextv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	perfv1 "perfexp.dev/perf-operator/api/v1alpha1"
	"perfexp.dev/perf-operator/internal/testenv"
)

// The apiserver's defaulting (CRD markers) and Go's Default must give the same
// spec, or an offline tool would analyse a different experiment than the operator.
func TestServerDefaultsEqualGoDefaults(t *testing.T) {
	files := examples(t)
	minimal := filepath.Join(t.TempDir(), "minimal.yaml")
	if err := os.WriteFile(minimal, []byte(`apiVersion: perfexp.dev/v1alpha1
kind: PerfExperiment
metadata: {name: minimal}
spec:
  target: {deployment: app, url: "http://app:8080"}
  load: {requests: [{path: /}]}
  stages: [{qps: 10}]
  toggle: {http: {port: 8081, path: /on, revert: {path: /off}}}
`), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, f := range append(files, minimal) {
		t.Run(exampleName(f), func(t *testing.T) {
			u := loadManifest(t, f)
			u.SetNamespace("default")
			var goDefaulted perfv1.PerfExperiment
			if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.DeepCopy().Object, &goDefaulted); err != nil {
				t.Fatal(err)
			}
			goDefaulted.Default()

			if err := k8s.Create(context.Background(), u, client.DryRunAll); err != nil {
				t.Fatal(err)
			}
			var serverDefaulted perfv1.PerfExperiment
			if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, &serverDefaulted); err != nil {
				t.Fatal(err)
			}
			if !equality.Semantic.DeepEqual(goDefaulted.Spec, serverDefaulted.Spec) {
				g, _ := yaml.Marshal(goDefaulted.Spec)
				s, _ := yaml.Marshal(serverDefaulted.Spec)
				t.Fatalf("Go defaults differ from the apiserver's\n--- Go\n%s\n--- apiserver\n%s", g, s)
			}
			if errs := serverDefaulted.Validate(); len(errs) > 0 {
				t.Fatalf("an example the apiserver accepts fails Go validation: %v", errs.ToAggregate())
			}
		})
	}
}

// Once the run has started, only spec.abort may change.
func TestSpecIsImmutableOnceStartedExceptAbort(t *testing.T) {
	ctx := context.Background()
	exp := &perfv1.PerfExperiment{}
	u := base(t)
	u.SetName("immutable")
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, exp); err != nil {
		t.Fatal(err)
	}
	if err := k8s.Create(ctx, exp); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = k8s.Delete(ctx, exp) })

	// Not started: the plan may still be edited (for example while Stalled on a
	// missing target).
	exp.Spec.Stages = append(exp.Spec.Stages, perfv1.StageSpec{QPS: 3000})
	if err := k8s.Update(ctx, exp); err != nil {
		t.Fatalf("edit before start refused: %v", err)
	}
	exp.Status.Phase = perfv1.PhasePending
	if err := k8s.Status().Update(ctx, exp); err != nil {
		t.Fatal(err)
	}
	exp.Spec.Windows.Settle = "1m"
	if err := k8s.Update(ctx, exp); err != nil {
		t.Fatalf("edit while Pending refused: %v", err)
	}

	exp.Status.Phase = perfv1.PhaseBaseline
	if err := k8s.Status().Update(ctx, exp); err != nil {
		t.Fatal(err)
	}
	edits := map[string]func(*perfv1.PerfExperiment){
		"stages":    func(e *perfv1.PerfExperiment) { e.Spec.Stages[0].QPS = 600 },
		"toggle":    func(e *perfv1.PerfExperiment) { e.Spec.Toggle.HTTP.Body = "full" },
		"target":    func(e *perfv1.PerfExperiment) { e.Spec.Target.Deployment = "other" },
		"windows":   func(e *perfv1.PerfExperiment) { e.Spec.Windows.Treatment = "10m" },
		"warmup":    func(e *perfv1.PerfExperiment) { e.Spec.Warmup = nil },
		"criteria":  func(e *perfv1.PerfExperiment) { e.Spec.SuccessCriteria = nil },
		"guardrail": func(e *perfv1.PerfExperiment) { e.Spec.Guardrails.ErrorRate = "50%" },
		"knee":      func(e *perfv1.PerfExperiment) { e.Spec.Knee.P99Factor = 10 },
		"toggle removed": func(e *perfv1.PerfExperiment) {
			e.Spec.Toggle, e.Spec.SuccessCriteria = nil, nil
		},
	}
	for name, edit := range edits {
		t.Run(name, func(t *testing.T) {
			changed := exp.DeepCopy()
			edit(changed)
			err := k8s.Update(ctx, changed)
			if err == nil {
				t.Fatal("edit of a started experiment was accepted")
			}
			if !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), "spec: Forbidden") ||
				!strings.Contains(err.Error(), "only spec.abort may change") {
				t.Fatalf("want a Forbidden error on spec naming spec.abort, got %v", err)
			}
		})
	}
	exp.Spec.Abort = true
	if err := k8s.Update(ctx, exp); err != nil {
		t.Fatalf("setting spec.abort on a started experiment refused: %v", err)
	}

	// A started load-only sweep (no toggle to compare) is held the same way.
	sweep := &perfv1.PerfExperiment{}
	u = base(t)
	u.SetName("immutable-sweep")
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, sweep); err != nil {
		t.Fatal(err)
	}
	sweep.Spec.Toggle, sweep.Spec.SuccessCriteria = nil, nil
	if err := k8s.Create(ctx, sweep); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = k8s.Delete(ctx, sweep) })
	sweep.Status.Phase = perfv1.PhaseBaseline
	if err := k8s.Status().Update(ctx, sweep); err != nil {
		t.Fatal(err)
	}
	for name, edit := range map[string]func(*perfv1.PerfExperiment){
		"stages":       func(e *perfv1.PerfExperiment) { e.Spec.Stages[0] = perfv1.StageSpec{Concurrency: 4} },
		"toggle added": func(e *perfv1.PerfExperiment) { e.Spec.Toggle = &perfv1.ToggleSpec{JVMOption: "-Xint"} },
	} {
		changed := sweep.DeepCopy()
		edit(changed)
		if err := k8s.Update(ctx, changed); err == nil || !strings.Contains(err.Error(), "only spec.abort may change") {
			t.Errorf("sweep %s: want the edit refused naming spec.abort, got %v", name, err)
		}
	}
	sweep.Spec.Abort = true
	if err := k8s.Update(ctx, sweep); err != nil {
		t.Fatalf("setting spec.abort on a started sweep refused: %v", err)
	}

	// A started run with variants: its variants are part of the plan.
	arms := &perfv1.PerfExperiment{}
	u = base(t)
	u.SetName("immutable-variants")
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, arms); err != nil {
		t.Fatal(err)
	}
	arms.Spec.Toggle = nil
	arms.Spec.Variants = []perfv1.ArmSpec{{Name: "serial", Toggle: perfv1.ToggleSpec{JVMOption: "-XX:+UseSerialGC"}}, {Name: "parallel", Toggle: perfv1.ToggleSpec{JVMOption: "-XX:+UseParallelGC"}}}
	if err := k8s.Create(ctx, arms); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = k8s.Delete(ctx, arms) })
	arms.Status.Phase = perfv1.PhaseTreatment
	if err := k8s.Status().Update(ctx, arms); err != nil {
		t.Fatal(err)
	}
	for name, edit := range map[string]func(*perfv1.PerfExperiment){
		"variant changed": func(e *perfv1.PerfExperiment) { e.Spec.Variants[1].Toggle.JVMOption = "-XX:+UseZGC" },
		"variant removed": func(e *perfv1.PerfExperiment) { e.Spec.Variants = e.Spec.Variants[:1] },
		"variants to a toggle": func(e *perfv1.PerfExperiment) {
			e.Spec.Variants, e.Spec.Toggle = nil, &perfv1.ToggleSpec{JVMOption: "-XX:+UseSerialGC"}
		},
	} {
		changed := arms.DeepCopy()
		edit(changed)
		if err := k8s.Update(ctx, changed); err == nil || !strings.Contains(err.Error(), "only spec.abort may change") {
			t.Errorf("variants %s: want the edit refused naming spec.abort, got %v", name, err)
		}
	}
	arms.Spec.Abort = true
	if err := k8s.Update(ctx, arms); err != nil {
		t.Fatalf("setting spec.abort on a started run with variants refused: %v", err)
	}
}

// `kubectl explain` is how SREs read the API; every field must be documented.
func TestKubectlExplainShowsDocumentedFields(t *testing.T) {
	path, err := env.AdminKubeconfig(t.TempDir(), "explainer")
	if err != nil {
		t.Fatal(err)
	}
	kubectl := filepath.Join(env.BinaryAssetsDirectory, "kubectl")
	explain := func(args ...string) string {
		// The apiserver publishes a new CRD's OpenAPI a moment after it is
		// established; on a busy machine explain can ask before that.
		for try := 0; ; try++ {
			out, err := exec.Command(kubectl, append([]string{"--kubeconfig", path, "explain"}, args...)...).CombinedOutput()
			if err == nil {
				return string(out)
			}
			if try == 50 || !strings.Contains(string(out), "couldn't find resource") {
				t.Fatalf("kubectl explain %v: %v\n%s", args, err, out)
			}
			time.Sleep(200 * time.Millisecond)
		}
	}
	rec := explain("perfexperiment.spec", "--recursive")
	for _, f := range []string{"target", "deployment", "requests", "scriptRef", "parallelism", "warmup", "stages", "baseline",
		"treatment", "settle", "toggle", "env", "jvmOption", "args", "http", "revert", "metrics", "prometheus", "guardrails",
		"maxGrowthPerMinute", "errorRate", "successCriteria", "maxP99Overhead", "abort"} {
		if !strings.Contains(rec, f) {
			t.Errorf("kubectl explain --recursive does not list %s:\n%s", f, rec)
		}
	}
	if out := explain("perfexperiment.spec.toggle"); !strings.Contains(out, "Exactly one kind is set") ||
		!strings.Contains(out, "JAVA_TOOL_OPTIONS") {
		t.Errorf("kubectl explain does not show the toggle's documentation:\n%s", out)
	}
	if out := explain("pexp.spec.abort"); !strings.Contains(out, "only field that may change") {
		t.Errorf("short name or abort documentation missing:\n%s", out)
	}
}

// Every property of the schema carries a description (it becomes kubectl explain).
func TestEveryFieldIsDocumented(t *testing.T) {
	b, err := os.ReadFile(filepath.Join(testenv.RepoRoot(), "config", "crd", "bases", "perfexp.dev_perfexperiments.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var crd apiextv1.CustomResourceDefinition
	if err := yaml.Unmarshal(b, &crd); err != nil {
		t.Fatal(err)
	}
	var missing []string
	var walk func(path string, s apiextv1.JSONSchemaProps)
	walk = func(path string, s apiextv1.JSONSchemaProps) {
		for name, p := range s.Properties {
			fp := path + "." + name
			if p.Description == "" && fp != ".metadata" { // ObjectMeta is documented upstream
				missing = append(missing, fp)
			}
			if fp == ".metadata" || strings.HasSuffix(fp, ".conditions") {
				continue // upstream types, documented upstream
			}
			walk(fp, p)
		}
		if s.Items != nil && s.Items.Schema != nil {
			walk(path+"[]", *s.Items.Schema)
		}
	}
	walk("", *crd.Spec.Versions[0].Schema.OpenAPIV3Schema)
	sort.Strings(missing)
	if len(missing) > 0 {
		t.Fatalf("fields without a description: %v", missing)
	}
	if sub := crd.Spec.Versions[0].Subresources; sub == nil || sub.Status == nil {
		t.Fatal("the CRD has no status subresource: the operator's status writes would bump the generation")
	}
}
