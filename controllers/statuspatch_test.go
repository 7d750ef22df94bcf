package controllers

import (
	"encoding/json"
	"testing"

	jsonpatch "github.com/evanphx/json-patch/v5"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	perfv1 "perfexp.dev/perf-operator/api/v1alpha1"
)

// The status patch, applied to the persisted experiment, gives the status the
// reconciler wrote (fields changed, added and removed, lists replaced) and
// leaves metadata and spec alone; it carries the base's resourceVersion.
func TestStatusPatchWritesTheStatusUnderTheOptimisticLock(t *testing.T) {
	before := &perfv1.PerfExperiment{
		ObjectMeta: metav1.ObjectMeta{Name: "e", Namespace: "ns", ResourceVersion: "41", Labels: map[string]string{"a": "b"}},
		Spec:       perfv1.PerfExperimentSpec{Target: perfv1.TargetSpec{Deployment: "app"}},
		Status: perfv1.PerfExperimentStatus{Phase: perfv1.PhaseBaseline, CurrentStage: "s0",
			Measurement: &perfv1.MeasurementStatus{Replicas: 2, LastError: "timeout"},
			Windows:     []perfv1.WindowStatus{{Stage: 0, QPS: 10, Variant: perfv1.VariantBaseline, Job: "j0"}}},
	}
	after := before.DeepCopy()
	after.Labels = map[string]string{"changed": "locally"}
	after.Status.Phase = perfv1.PhaseTreatment
	after.Status.CurrentStage = ""
	after.Status.Measurement.LastError = ""
	after.Status.Windows = append(after.Status.Windows, perfv1.WindowStatus{Stage: 0, QPS: 10, Variant: perfv1.VariantTreatment, Job: "j1"})
	data, err := statusMergePatch{from: before, to: after}.Data(nil)
	if err != nil {
		t.Fatal(err)
	}
	var head struct {
		Metadata map[string]any `json:"metadata"`
		Spec     any            `json:"spec"`
	}
	if err := json.Unmarshal(data, &head); err != nil {
		t.Fatal(err)
	}
	if len(head.Metadata) != 1 || head.Metadata["resourceVersion"] != "41" || head.Spec != nil {
		t.Errorf("patch %s: want metadata.resourceVersion 41 alone and no spec", data)
	}
	orig, _ := json.Marshal(before)
	patched, err := jsonpatch.MergePatch(orig, data)
	if err != nil {
		t.Fatal(err)
	}
	got := &perfv1.PerfExperiment{}
	if err := json.Unmarshal(patched, got); err != nil {
		t.Fatal(err)
	}
	if !equality.Semantic.DeepEqual(got.Status, after.Status) {
		t.Errorf("patched status %+v, want %+v", got.Status, after.Status)
	}
	if !equality.Semantic.DeepEqual(got.Spec, before.Spec) || got.Labels["a"] != "b" {
		t.Errorf("the patch changed more than the status: %s", data)
	}
	if _, err := (statusMergePatch{from: &perfv1.PerfExperiment{}, to: after}).Data(nil); err == nil {
		t.Error("a base without resourceVersion was patched without the lock")
	}
}

// mergePatch makes the patch jsonpatch.CreateMergePatch makes, member for
// member, and applying it gives the new document.
func TestMergePatchIsCreateMergePatch(t *testing.T) {
	cases := []struct{ name, before, after string }{
		{"unchanged", `{"a":1,"w":[{"x":1}],"t":{"p":["a"]}}`, `{"a":1,"w":[{"x":1}],"t":{"p":["a"]}}`},
		{"scalar changed, added, removed", `{"a":1,"b":"x"}`, `{"a":2,"c":true}`},
		{"list changed is sent whole", `{"w":[{"x":1},{"x":2}]}`, `{"w":[{"x":1},{"x":3}]}`},
		{"nested member removed", `{"t":{"applied":true,"pods":["a","b"],"at":"now"}}`, `{"t":{"applied":false,"pods":["a","b"]}}`},
		{"nested twice", `{"m":{"r":{"a":1,"b":2},"c":3}}`, `{"m":{"r":{"a":1},"c":3}}`},
		{"object to scalar and back", `{"a":{"x":1},"b":2}`, `{"a":null,"b":{"y":1}}`},
		{"new object with a null inside", `{}`, `{"a":{"x":null,"y":1}}`},
		{"empty to full", `{}`, `{"phase":"Baseline","windows":[{"stage":0}]}`},
		{"full to empty", `{"phase":"Baseline","windows":[{"stage":0}]}`, `{}`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, err := mergePatch([]byte(c.before), []byte(c.after))
			if err != nil {
				t.Fatal(err)
			}
			want, err := jsonpatch.CreateMergePatch([]byte(c.before), []byte(c.after))
			if err != nil {
				t.Fatal(err)
			}
			if !jsonEqual(t, got, want) {
				t.Errorf("patch %s, CreateMergePatch makes %s", got, want)
			}
			applied, err := jsonpatch.MergePatch([]byte(c.before), got)
			if err != nil {
				t.Fatal(err)
			}
			wantApplied, err := jsonpatch.MergePatch([]byte(c.before), want)
			if err != nil {
				t.Fatal(err)
			}
			if !jsonEqual(t, applied, wantApplied) {
				t.Errorf("applied: %s, want %s", applied, wantApplied)
			}
		})
	}
}

func jsonEqual(t *testing.T, a, b []byte) bool {
	t.Helper()
	var x, y any
	if err := json.Unmarshal(a, &x); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &y); err != nil {
		t.Fatal(err)
	}
	return equality.Semantic.DeepEqual(x, y)
}
