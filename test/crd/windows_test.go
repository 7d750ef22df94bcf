package crd

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	perfv1 "perfexp.dev/perf-operator/api/v1alpha1"
)

// The CRD's rule for the shortest measured window and the Go one
// (v1alpha1.MinMeasuredWindow, which kubectl-perf and the controller's
// preflight use) agree to the second: at the bound both accept, a second under
// it both refuse naming the window, for every design, both sources and
// intervals from 1s to 5m.
func TestMinMeasuredWindowIsTheCRDs(t *testing.T) {
	ctx := context.Background()
	kinds := []struct {
		name  string
		edits []edit
	}{
		{"toggle", nil},
		{"sweep", []edit{{"toggle", del}, {"successCriteria", del}}},
		{"interleaved", []edit{{"design", "interleaved"}}},
	}
	sources := []struct {
		name  string
		edits []edit
	}{
		{"prometheus (auto)", nil},
		{"metrics-server", []edit{{"metrics.source", "metrics-server"}, {"metrics.prometheus", del}}},
	}
	checked := 0
	for _, k := range kinds {
		for _, src := range sources {
			for _, iv := range []time.Duration{time.Second, 5 * time.Second, 10 * time.Second, 15 * time.Second, 30 * time.Second, time.Minute, 90 * time.Second, 5 * time.Minute} {
				var exp perfv1.PerfExperiment
				u := base(t)
				for _, e := range append(append(append([]edit{}, k.edits...), src.edits...), edit{"metrics.interval", iv.String()}) {
					apply(t, u.Object, e)
				}
				if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, &exp); err != nil {
					t.Fatal(err)
				}
				exp.Default()
				least, _ := exp.Spec.MinMeasuredWindow(iv)
				for _, w := range []time.Duration{least, least - time.Second} {
					if w < 20*time.Second || w > 24*time.Hour {
						continue // the windows' own range decides
					}
					name := fmt.Sprintf("%s/%s/%s/window %s", k.name, src.name, iv, w)
					v := u.DeepCopy()
					v.SetName(fmt.Sprintf("w%d", checked))
					apply(t, v.Object, edit{"windows.baseline", w.String()})
					apply(t, v.Object, edit{"windows.treatment", w.String()})
					err := k8s.Create(ctx, v, client.DryRunAll, client.FieldValidation("Strict"))
					var got perfv1.PerfExperiment
					if cerr := runtime.DefaultUnstructuredConverter.FromUnstructured(v.Object, &got); cerr != nil {
						t.Fatal(cerr)
					}
					got.Default()
					goErrs := got.Validate()
					checked++
					if w == least {
						if err != nil || len(goErrs) > 0 {
							t.Errorf("%s: at the bound, CRD %v, Go %v; want both to accept", name, err, goErrs)
						}
						continue
					}
					if err == nil || !strings.Contains(err.Error(), "spec.windows.baseline") {
						t.Errorf("%s: a second under the bound, the CRD says %v; want spec.windows.baseline refused", name, err)
					}
					if len(goErrs) == 0 || goErrs[0].Field != "spec.windows.baseline" {
						t.Errorf("%s: a second under the bound, Go says %v; want spec.windows.baseline first", name, goErrs)
					}
				}
			}
		}
	}
	if checked < 60 {
		t.Fatalf("checked %d cases; the grid should give at least 60", checked)
	}
}
