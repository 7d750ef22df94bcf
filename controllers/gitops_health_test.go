package controllers

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	kstatus "github.com/fluxcd/cli-utils/pkg/kstatus/status"
	"github.com/fluxcd/pkg/apis/kustomize"
	fluxcel "github.com/fluxcd/pkg/runtime/cel"
	lua "github.com/yuin/gopher-lua"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/yaml"

	perfv1 "perfexp.dev/perf-operator/api/v1alpha1"
	"perfexp.dev/perf-operator/internal/engine"
)

// argoHealth runs config/argocd/health.lua the way Argo CD does: the object as
// the global `obj`, a table {status, message} returned.
func argoHealth(t *testing.T, exp *perfv1.PerfExperiment) (string, string) {
	t.Helper()
	script, err := os.ReadFile(filepath.Join("..", "config", "argocd", "health.lua"))
	if err != nil {
		t.Fatal(err)
	}
	raw, _ := json.Marshal(exp)
	var obj map[string]any
	if err := json.Unmarshal(raw, &obj); err != nil {
		t.Fatal(err)
	}
	L := lua.NewState()
	defer L.Close()
	L.SetGlobal("obj", toLua(L, obj))
	if err := L.DoString(string(script)); err != nil {
		t.Fatalf("health.lua: %v", err)
	}
	ret, ok := L.Get(-1).(*lua.LTable)
	if !ok {
		t.Fatal("health.lua returned no table")
	}
	return ret.RawGetString("status").String(), ret.RawGetString("message").String()
}

// toLua converts decoded JSON to Lua values, as Argo CD's runtime does.
func toLua(L *lua.LState, v any) lua.LValue {
	switch x := v.(type) {
	case map[string]any:
		t := L.NewTable()
		for k, e := range x {
			t.RawSetString(k, toLua(L, e))
		}
		return t
	case []any:
		t := L.NewTable()
		for _, e := range x {
			t.Append(toLua(L, e))
		}
		return t
	case string:
		return lua.LString(x)
	case float64:
		return lua.LNumber(x)
	case bool:
		return lua.LBool(x)
	}
	return lua.LNil
}

// gitopsCases are statuses as the controller writes them (setConditions), with
// what each GitOps tool must make of them: Argo CD through config/argocd/health.lua,
// Flux through kstatus (the fork its kustomize-controller and helm-controller use).
func gitopsCases(now time.Time) []struct {
	name    string
	exp     *perfv1.PerfExperiment
	argo    string
	argoMsg string
	flux    kstatus.Status
} {
	written := func(gen, observed int64, st perfv1.PerfExperimentStatus, d *engine.Decision) *perfv1.PerfExperiment {
		exp := &perfv1.PerfExperiment{ObjectMeta: metav1.ObjectMeta{Name: "e", Namespace: "shop", Generation: gen}, Status: st}
		exp.APIVersion, exp.Kind = perfv1.GroupVersion.String(), "PerfExperiment"
		if d != nil {
			setConditions(&exp.Status, nil, observed, *d, now)
			exp.Status.ObservedGeneration = observed
		}
		return exp
	}
	return []struct {
		name    string
		exp     *perfv1.PerfExperiment
		argo    string
		argoMsg string
		flux    kstatus.Status
	}{
		{"running", written(2, 2, perfv1.PerfExperimentStatus{Phase: perfv1.PhaseTreatment, Toggle: &perfv1.ToggleStatus{Applied: true}},
			&engine.Decision{Waiting: "treatment window of stage 500: measuring"}), "Progressing", "measuring", kstatus.InProgressStatus},
		{"stalled on a missing target", written(2, 2, perfv1.PerfExperimentStatus{},
			&engine.Decision{Stall: &engine.Stall{Reason: perfv1.ReasonTargetNotFound, Message: `Deployment "x" not found`}}), "Degraded", "TargetNotFound", kstatus.FailedStatus},
		{"succeeded", written(2, 2, perfv1.PerfExperimentStatus{Phase: perfv1.PhaseSucceeded, Verdict: perfv1.VerdictPass, Toggle: &perfv1.ToggleStatus{}},
			&engine.Decision{}), "Healthy", "Verdict Pass", kstatus.CurrentStatus},
		{"succeeded with a failing verdict", written(2, 2, perfv1.PerfExperimentStatus{Phase: perfv1.PhaseSucceeded, Verdict: perfv1.VerdictFail, Toggle: &perfv1.ToggleStatus{}},
			&engine.Decision{}), "Degraded", "Verdict Fail", kstatus.CurrentStatus},
		// Queued behind another experiment: still progress for every tool.
		{"queued behind another experiment", written(2, 2, perfv1.PerfExperimentStatus{},
			&engine.Decision{Waiting: "queued: Deployment \"x\" is held by experiment shop/other", WaitReason: perfv1.ReasonQueued}),
			"Progressing", "held by experiment shop/other", kstatus.InProgressStatus},
		{"aborted by a guardrail", written(2, 2, perfv1.PerfExperimentStatus{Phase: perfv1.PhaseAborted, Toggle: &perfv1.ToggleStatus{},
			Abort: &perfv1.AbortStatus{Reason: perfv1.ReasonHeapGrowth, Message: "heap +712 MiB/min"}},
			&engine.Decision{}), "Degraded", "HeapGrowth: heap +712 MiB/min", kstatus.FailedStatus},
		// kstatus's one blind spot: no status at all reads Current. Flux's
		// healthCheckExprs in config/flux close it (TestFluxHealthCheckExprs).
		{"not reconciled yet", written(1, 0, perfv1.PerfExperimentStatus{}, nil), "Progressing", "", kstatus.CurrentStatus},
		{"status behind the spec", written(3, 2, perfv1.PerfExperimentStatus{Phase: perfv1.PhaseSucceeded}, &engine.Decision{}),
			"Progressing", "latest spec", kstatus.InProgressStatus},
	}
}

// The Argo CD health check reads exactly the conditions setConditions writes.
func TestArgoCDHealthFollowsTheControllersConditions(t *testing.T) {
	for _, tc := range gitopsCases(time.Date(2026, 11, 23, 8, 0, 0, 0, time.UTC)) {
		t.Run(tc.name, func(t *testing.T) {
			health, msg := argoHealth(t, tc.exp)
			if health != tc.argo || !strings.Contains(msg, tc.argoMsg) {
				t.Fatalf("health %s %q; want %s with %q", health, msg, tc.argo, tc.argoMsg)
			}
		})
	}
}

// Flux waits on a PerfExperiment with kstatus: a finished experiment must read
// Current (the Kustomization becomes Ready), an aborted or stalled one Failed
// (the Kustomization fails at once instead of timing out), a running one
// InProgress.
func TestFluxKstatusFollowsTheControllersConditions(t *testing.T) {
	for _, tc := range gitopsCases(time.Date(2026, 11, 23, 8, 0, 0, 0, time.UTC)) {
		t.Run(tc.name, func(t *testing.T) {
			raw, err := runtime.DefaultUnstructuredConverter.ToUnstructured(tc.exp)
			if err != nil {
				t.Fatal(err)
			}
			res, err := kstatus.Compute(&unstructured.Unstructured{Object: raw})
			if err != nil {
				t.Fatal(err)
			}
			if res.Status != tc.flux {
				t.Fatalf("kstatus %s (%s); want %s", res.Status, res.Message, tc.flux)
			}
		})
	}
}

// The healthCheckExprs of config/flux/kustomization.yaml, run by Flux's own
// evaluator: the same outcomes as kstatus, except that an experiment the operator
// has not reconciled yet is InProgress instead of Current, and one that completed
// with verdict Fail is Failed, as in Argo CD.
func TestFluxHealthCheckExprs(t *testing.T) {
	raw, err := os.ReadFile(filepath.Join("..", "config", "flux", "kustomization.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var ks struct {
		Spec struct {
			HealthCheckExprs []kustomize.CustomHealthCheck `json:"healthCheckExprs"`
		} `json:"spec"`
	}
	if err := yaml.Unmarshal(raw, &ks); err != nil {
		t.Fatal(err)
	}
	if len(ks.Spec.HealthCheckExprs) != 1 || ks.Spec.HealthCheckExprs[0].Kind != "PerfExperiment" ||
		ks.Spec.HealthCheckExprs[0].APIVersion != perfv1.GroupVersion.String() {
		t.Fatalf("want one health check for %s PerfExperiment, got %+v", perfv1.GroupVersion, ks.Spec.HealthCheckExprs)
	}
	ev, err := fluxcel.NewStatusEvaluator(&ks.Spec.HealthCheckExprs[0].HealthCheckExpressions)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range gitopsCases(time.Date(2026, 11, 23, 8, 0, 0, 0, time.UTC)) {
		t.Run(tc.name, func(t *testing.T) {
			want := tc.flux
			switch tc.name {
			case "not reconciled yet":
				want = kstatus.InProgressStatus
			case "succeeded with a failing verdict":
				want = kstatus.FailedStatus
			}
			obj, err := runtime.DefaultUnstructuredConverter.ToUnstructured(tc.exp)
			if err != nil {
				t.Fatal(err)
			}
			res, err := ev.Evaluate(context.Background(), &unstructured.Unstructured{Object: obj})
			if err != nil {
				t.Fatal(err)
			}
			if res.Status != want {
				t.Fatalf("Flux health %s; want %s", res.Status, want)
			}
		})
	}
}
