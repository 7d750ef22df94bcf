package controllers

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	lua "github.com/yuin/gopher-lua"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

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

// The health check reads exactly the conditions setConditions writes.
func TestArgoCDHealthFollowsTheControllersConditions(t *testing.T) {
	now := time.Date(2026, 11, 23, 8, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		name   string
		st     perfv1.PerfExperimentStatus
		d      engine.Decision
		health string
		msg    string
	}{
		{"running", perfv1.PerfExperimentStatus{Phase: perfv1.PhaseTreatment, Toggle: &perfv1.ToggleStatus{Applied: true}},
			engine.Decision{Waiting: "treatment window of stage 500: measuring"}, "Progressing", "measuring"},
		{"stalled on a missing target", perfv1.PerfExperimentStatus{},
			engine.Decision{Stall: &engine.Stall{Reason: perfv1.ReasonTargetNotFound, Message: `Deployment "x" not found`}}, "Degraded", "TargetNotFound"},
		{"succeeded", perfv1.PerfExperimentStatus{Phase: perfv1.PhaseSucceeded, Verdict: perfv1.VerdictPass, Toggle: &perfv1.ToggleStatus{}},
			engine.Decision{}, "Healthy", "Verdict Pass"},
		{"aborted by a guardrail", perfv1.PerfExperimentStatus{Phase: perfv1.PhaseAborted, Toggle: &perfv1.ToggleStatus{},
			Abort: &perfv1.AbortStatus{Reason: perfv1.ReasonHeapGrowth, Message: "heap +712 MiB/min"}},
			engine.Decision{}, "Degraded", "HeapGrowth: heap +712 MiB/min"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			exp := &perfv1.PerfExperiment{ObjectMeta: metav1.ObjectMeta{Name: "e", Generation: 2}, Status: tc.st}
			setConditions(&exp.Status, nil, 2, tc.d, now)
			exp.Status.ObservedGeneration = 2
			health, msg := argoHealth(t, exp)
			if health != tc.health || !strings.Contains(msg, tc.msg) {
				t.Fatalf("health %s %q; want %s with %q", health, msg, tc.health, tc.msg)
			}
		})
	}
	t.Run("not reconciled yet", func(t *testing.T) {
		if h, _ := argoHealth(t, &perfv1.PerfExperiment{}); h != "Progressing" {
			t.Fatalf("health %s", h)
		}
	})
	t.Run("status behind the spec", func(t *testing.T) {
		exp := &perfv1.PerfExperiment{ObjectMeta: metav1.ObjectMeta{Generation: 3},
			Status: perfv1.PerfExperimentStatus{ObservedGeneration: 2, Phase: perfv1.PhaseSucceeded}}
		setConditions(&exp.Status, nil, 2, engine.Decision{}, now)
		if h, _ := argoHealth(t, exp); h != "Progressing" {
			t.Fatalf("health %s for a status behind the spec", h)
		}
	})
}
