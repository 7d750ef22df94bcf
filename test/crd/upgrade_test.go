package crd

import (
	"context"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// A CRD upgrade that tightens the windows' rule (v1alpha1.MinMeasuredWindow)
// must not trap the experiments created under the looser one: an SRE can
// still abort one, and the operator can still write its status and remove
// its finalizer. The test installs the CRD with the rule as it was (4
// metrics.interval), creates an experiment with 2-minute windows at 15 s
// through Prometheus, puts the current CRD back and edits the experiment.
func TestOldExperimentsStayAbortableAfterTheWindowRuleTightened(t *testing.T) {
	ctx := context.Background()
	crd := &unstructured.Unstructured{}
	crd.SetGroupVersionKind(schema.GroupVersionKind{Group: "apiextensions.k8s.io", Version: "v1", Kind: "CustomResourceDefinition"})
	if err := k8s.Get(ctx, client.ObjectKey{Name: "perfexperiments.perfexp.dev"}, crd); err != nil {
		t.Fatal(err)
	}
	current := crd.DeepCopy()
	loose := crd.DeepCopy()
	versions, _, _ := unstructured.NestedSlice(loose.Object, "spec", "versions")
	rules, _, _ := unstructured.NestedSlice(versions[0].(map[string]any), "schema", "openAPIV3Schema", "properties", "spec", "x-kubernetes-validations")
	replaced := 0
	for _, r := range rules {
		rule := r.(map[string]any)
		for _, w := range []string{"baseline", "treatment"} {
			if rule["fieldPath"] == ".windows."+w {
				rule["rule"] = "duration(self.windows." + w + ").getMilliseconds() >= 4 * duration(self.metrics.interval).getMilliseconds()"
				replaced++
			}
		}
	}
	if replaced != 2 {
		t.Fatalf("found %d window rules in the CRD; want 2", replaced)
	}
	if err := unstructured.SetNestedSlice(versions[0].(map[string]any), rules, "schema", "openAPIV3Schema", "properties", "spec", "x-kubernetes-validations"); err != nil {
		t.Fatal(err)
	}
	if err := unstructured.SetNestedSlice(loose.Object, versions, "spec", "versions"); err != nil {
		t.Fatal(err)
	}
	short := func(name string) *unstructured.Unstructured {
		u := base(t)
		u.SetName(name)
		for _, e := range []edit{{"windows.baseline", "2m"}, {"windows.treatment", "2m"}, {"metrics.interval", "15s"}} {
			apply(t, u.Object, e)
		}
		return u
	}
	// setCRD installs a CRD and waits until the apiserver answers with it.
	setCRD := func(u *unstructured.Unstructured, accepts bool) {
		t.Helper()
		cur := &unstructured.Unstructured{}
		cur.SetGroupVersionKind(u.GroupVersionKind())
		if err := k8s.Get(ctx, client.ObjectKey{Name: u.GetName()}, cur); err != nil {
			t.Fatal(err)
		}
		next := u.DeepCopy()
		next.SetResourceVersion(cur.GetResourceVersion())
		if err := k8s.Update(ctx, next); err != nil {
			t.Fatal(err)
		}
		for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(200 * time.Millisecond) {
			err := k8s.Create(ctx, short("probe"), client.DryRunAll)
			if (err == nil) == accepts {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("the CRD update did not take: dry run gives %v", err)
			}
		}
	}
	setCRD(loose, true)
	restored := false
	defer func() {
		if !restored {
			setCRD(current, false)
		}
	}()
	old := short("created-under-the-looser-rule")
	if err := k8s.Create(ctx, old); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = k8s.Delete(ctx, old) }()
	setCRD(current, false)
	restored = true
	if err := k8s.Create(ctx, short("created-now"), client.DryRunAll); err == nil || !strings.Contains(err.Error(), "spec.windows.baseline") {
		t.Fatalf("a new experiment with 2m windows at 15s: %v; want it refused naming spec.windows.baseline", err)
	}

	key := client.ObjectKeyFromObject(old)
	patch := func(what string, sub string, body string) {
		t.Helper()
		u := &unstructured.Unstructured{}
		u.SetGroupVersionKind(old.GroupVersionKind())
		u.SetNamespace(key.Namespace)
		u.SetName(key.Name)
		var err error
		if sub == "" {
			err = k8s.Patch(ctx, u, client.RawPatch(types.MergePatchType, []byte(body)))
		} else {
			err = k8s.Status().Patch(ctx, u, client.RawPatch(types.MergePatchType, []byte(body)))
		}
		if err != nil {
			if apierrors.IsInvalid(err) {
				t.Errorf("%s refused: %v", what, err)
				return
			}
			t.Fatalf("%s: %v", what, err)
		}
	}
	// The operator starts it (status) and adds its finalizer; an SRE labels
	// it, then aborts it; the operator removes its finalizer.
	patch("the operator's status write", "status", `{"status":{"phase":"Baseline","observedGeneration":1}}`)
	patch("the operator's finalizer", "", `{"metadata":{"finalizers":["perfexp.dev/cleanup"]}}`)
	patch("a label", "", `{"metadata":{"labels":{"team":"sre"}}}`)
	patch("spec.abort", "", `{"spec":{"abort":true}}`)
	patch("the finalizer's removal", "", `{"metadata":{"finalizers":null}}`)
}
