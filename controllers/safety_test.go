package controllers_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	perfv1 "perfexp.dev/perf-operator/api/v1alpha1"
)

// editTarget changes the target as someone else would, retrying conflicts.
func editTarget(t *testing.T, ns string, edit func(*appsv1.Deployment)) {
	t.Helper()
	for i := 0; ; i++ {
		dep := &appsv1.Deployment{}
		if err := k8s.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: "app"}, dep); err != nil {
			t.Fatal(err)
		}
		edit(dep)
		err := k8s.Update(context.Background(), dep)
		if err == nil {
			return
		}
		if i > 20 {
			t.Fatal(err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// Someone else's change to a held target mid-run (kubectl replace dropping the
// lock annotations, rollout undo, set env) aborts the run with TargetChanged
// naming what changed, and the revert still runs from the recorded original.
func TestForeignEditsAbortAndTheRevertStillRuns(t *testing.T) {
	for _, tc := range []struct {
		name  string
		phase perfv1.Phase
		edit  func(dep *appsv1.Deployment)
		inMsg string
		// keep is what the target keeps of the edit after the revert: the
		// experiment owns its toggled variable only.
		keep func(dep *appsv1.Deployment)
	}{
		{"kubectl replace drops the lock mid-treatment", perfv1.PhaseTreatment, func(dep *appsv1.Deployment) {
			dep.Annotations = map[string]string{"team": "payments"}
			dep.Labels = nil
		}, "lock annotations", nil},
		{"rollout undo mid-treatment", perfv1.PhaseTreatment, func(dep *appsv1.Deployment) {
			c := &dep.Spec.Template.Spec.Containers[0]
			var env []corev1.EnvVar
			for _, e := range c.Env {
				if e.Name != "PROFILING" {
					env = append(env, e)
				}
			}
			c.Env = env
		}, "pod template", nil},
		{"set env on another variable mid-baseline", perfv1.PhaseBaseline, func(dep *appsv1.Deployment) {
			c := &dep.Spec.Template.Spec.Containers[0]
			c.Env = append(c.Env, corev1.EnvVar{Name: "DEBUG", Value: "1"})
		}, "pod template", func(dep *appsv1.Deployment) {
			c := &dep.Spec.Template.Spec.Containers[0]
			c.Env = append(c.Env, corev1.EnvVar{Name: "DEBUG", Value: "1"})
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := newDriver(t)
			orig := d.c.target("app")
			if err := k8s.Create(context.Background(), shortExperiment(d.c.ns, "app", envToggle())); err != nil {
				t.Fatal(err)
			}
			d.until(string(tc.phase), phaseIs(tc.phase))
			editTarget(t, d.c.ns, tc.edit)
			exp := d.until("Aborted", terminal)
			if exp.Status.Phase != perfv1.PhaseAborted || exp.Status.Abort == nil || exp.Status.Abort.Reason != perfv1.ReasonTargetChanged ||
				!strings.Contains(exp.Status.Abort.Message, tc.inMsg) {
				t.Fatalf("phase %s abort %+v", exp.Status.Phase, exp.Status.Abort)
			}
			for _, w := range exp.Status.Windows {
				if w.Variant != perfv1.VariantSettle && w.Load == nil && (w.Valid == nil || *w.Valid) {
					t.Errorf("window %d/%s open at the edit is not marked untrustworthy: %+v", w.Stage, w.Variant, w)
				}
			}
			want := orig.DeepCopy()
			if tc.keep != nil {
				tc.keep(want)
			}
			wantJSON := templateOf(t, want)
			var dep *appsv1.Deployment
			for i := 0; i < 100; i++ {
				dep = &appsv1.Deployment{}
				if err := k8s.Get(context.Background(), client.ObjectKey{Namespace: d.c.ns, Name: "app"}, dep); err != nil {
					t.Fatal(err)
				}
				if templateOf(t, dep) == wantJSON && dep.Annotations[perfv1.AnnotationLock] == "" && dep.Labels[perfv1.LabelExperiment] == "" {
					break
				}
				time.Sleep(50 * time.Millisecond)
			}
			if got := templateOf(t, dep); got != wantJSON {
				t.Fatalf("template not restored:\n got %s\nwant %s", got, wantJSON)
			}
			for _, a := range []string{perfv1.AnnotationLock, perfv1.AnnotationOriginal, perfv1.AnnotationTemplateHash} {
				if _, ok := dep.Annotations[a]; ok {
					t.Errorf("annotation %s left: %v", a, dep.Annotations)
				}
			}
			if _, ok := dep.Labels[perfv1.LabelExperiment]; ok {
				t.Errorf("label left: %v", dep.Labels)
			}
		})
	}
}

func templateOf(t *testing.T, dep *appsv1.Deployment) string {
	t.Helper()
	b, err := json.Marshal(dep.Spec.Template)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// flakyAdmin answers every "off" with 500 until healed; "on" is accepted.
type flakyAdmin struct {
	*adminServer
	mu     sync.Mutex
	healed bool
}

func (f *flakyAdmin) heal() {
	f.mu.Lock()
	f.healed = true
	f.mu.Unlock()
}

// A revert answering 500 shows at once (RevertFailing=True and a Warning
// event), the load stops before it, it is retried within seconds, and once the
// endpoint recovers the run ends with the pods switched back.
func TestAFailingRevertIsVisibleRetriedAndEnds(t *testing.T) {
	for _, tc := range []struct {
		name   string
		heal   bool
		policy perfv1.RevertFailurePolicy
	}{
		{"the endpoint recovers", true, perfv1.RevertFailureRestartPods},
		{"it never does: RestartPods", false, perfv1.RevertFailureRestartPods},
		{"it never does: Keep", false, perfv1.RevertFailureKeep},
	} {
		t.Run(tc.name, func(t *testing.T) {
			clock := newTestClock()
			admin := newAdminServer(t, clock, "")
			fa := &flakyAdmin{adminServer: admin}
			admin.srv.Config.Handler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				b, _ := io.ReadAll(r.Body)
				r.Body = io.NopCloser(bytes.NewReader(b))
				fa.mu.Lock()
				healed := fa.healed
				fa.mu.Unlock()
				if string(b) == "off" && !healed {
					admin.serve(discard{}, r) // recorded, then refused
					w.WriteHeader(http.StatusInternalServerError)
					_, _ = io.WriteString(w, "profiler busy\n")
					return
				}
				admin.serve(w, r)
			})
			d := newDriverWith(t, clock, runtimeToggles{http: admin.sender()})
			dep := d.c.target("app")
			targetPods(t, d.c.ns, dep)
			e := shortExperiment(d.c.ns, "app", httpToggleSpec())
			e.Spec.Windows.Settle = "0s"
			e.Spec.Toggle.OnRevertFailure = tc.policy
			if err := k8s.Create(context.Background(), e); err != nil {
				t.Fatal(err)
			}
			d.until("treatment", phaseIs(perfv1.PhaseTreatment))
			patch := []byte(`{"spec":{"abort":true}}`)
			obj := &perfv1.PerfExperiment{ObjectMeta: metav1.ObjectMeta{Namespace: d.c.ns, Name: d.name}}
			if err := k8s.Patch(context.Background(), obj, client.RawPatch("application/merge-patch+json", patch)); err != nil {
				t.Fatal(err)
			}
			// Visible at once, on the object and as an event, with the load stopped.
			exp := d.until("RevertFailing", func(e *perfv1.PerfExperiment) bool {
				return meta.IsStatusConditionTrue(e.Status.Conditions, perfv1.ConditionRevertFailing)
			})
			c := meta.FindStatusCondition(exp.Status.Conditions, perfv1.ConditionRevertFailing)
			if !strings.Contains(c.Message, "500") {
				t.Errorf("RevertFailing message %q does not say what the pod answered", c.Message)
			}
			if !meta.IsStatusConditionTrue(exp.Status.Conditions, perfv1.ConditionToggleApplied) {
				t.Errorf("ToggleApplied must stay True while the revert fails: %+v", exp.Status.Conditions)
			}
			assertWarningEvent(t, d.c.ns, perfv1.ReasonRevertFailing)
			assertNoRunningJobs(t, d.c.ns)
			if exp.Status.Phase != perfv1.PhaseAborted || exp.Status.Abort == nil || exp.Status.Abort.Reason != perfv1.ReasonAbortRequested {
				t.Errorf("the abort is not recorded while the revert fails: phase %s abort %+v", exp.Status.Phase, exp.Status.Abort)
			}

			if tc.heal {
				fa.heal()
			}
			// The ending is recorded at once; the revert goes on until it went
			// through or toggle.onRevertFailure decided.
			exp = d.until("the end of the revert", func(e *perfv1.PerfExperiment) bool {
				c := meta.FindStatusCondition(e.Status.Conditions, perfv1.ConditionRevertFailing)
				return terminal(e) && c != nil && c.Reason != perfv1.ReasonRevertFailing
			})
			if exp.Status.Phase != perfv1.PhaseAborted || exp.Status.Abort.Reason != perfv1.ReasonAbortRequested {
				t.Fatalf("phase %s abort %+v", exp.Status.Phase, exp.Status.Abort)
			}
			c = meta.FindStatusCondition(exp.Status.Conditions, perfv1.ConditionRevertFailing)
			var pods corev1.PodList
			if err := k8s.List(context.Background(), &pods, client.InNamespace(d.c.ns), client.MatchingLabels{"app": "app"}); err != nil {
				t.Fatal(err)
			}
			live := 0
			for _, p := range pods.Items {
				if p.DeletionTimestamp == nil {
					live++
				}
			}
			switch {
			case tc.heal:
				if c == nil || c.Status != metav1.ConditionFalse || c.Reason != perfv1.ReasonReverted {
					t.Errorf("RevertFailing after recovery: %+v", c)
				}
				for _, p := range fakePods {
					got := admin.bodies(p.ip)
					if len(got) < 3 || got[len(got)-1] != "off" {
						t.Errorf("pod %s got %q; want a last, successful off", p.name, got)
					}
				}
				assertNothingApplied(t, exp)
				if live != 2 {
					t.Errorf("%d target pods left; none should be deleted", live)
				}
			case tc.policy == perfv1.RevertFailureRestartPods:
				if c == nil || c.Status != metav1.ConditionFalse || c.Reason != perfv1.ReasonPodsRestarted {
					t.Errorf("RevertFailing after RestartPods: %+v", c)
				}
				if live != 0 {
					t.Errorf("%d recorded pods not deleted", live)
				}
				assertNothingApplied(t, exp)
			default:
				if c == nil || c.Status != metav1.ConditionTrue || c.Reason != perfv1.ReasonRevertAbandoned || !strings.Contains(c.Message, "app-1") {
					t.Errorf("RevertFailing after Keep: %+v", c)
				}
				if live != 2 {
					t.Errorf("%d target pods left; Keep deletes none", live)
				}
				if tg := exp.Status.Toggle; tg == nil || !reflect.DeepEqual(tg.Pods, []string{"app-1", "app-2"}) {
					t.Errorf("status.toggle.pods must name the pods kept: %+v", tg)
				}
			}
		})
	}
}

// discard is a response nobody reads: the flaky handler answers itself.
type discard struct{}

func (discard) Header() http.Header         { return http.Header{} }
func (discard) WriteHeader(int)             {}
func (discard) Write(b []byte) (int, error) { return len(b), nil }

func assertWarningEvent(t *testing.T, ns, reason string) {
	t.Helper()
	for i := 0; i < 100; i++ {
		var evs corev1.EventList
		if err := k8s.List(context.Background(), &evs, client.InNamespace(ns)); err != nil {
			t.Fatal(err)
		}
		for _, e := range evs.Items {
			if e.Reason == reason && e.Type == corev1.EventTypeWarning {
				return
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Errorf("no Warning event %s", reason)
}

func assertNoRunningJobs(t *testing.T, ns string) {
	t.Helper()
	var jobs batchv1.JobList
	if err := k8s.List(context.Background(), &jobs, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	for _, j := range jobs.Items {
		if j.DeletionTimestamp == nil && j.Status.CompletionTime == nil {
			t.Errorf("load Job %s still running while the revert fails", j.Name)
		}
	}
}

// A query template that misuses a placeholder passes admission (it is a
// string) but stalls preflight, naming the field, before the target is locked.
func TestAnInvalidQueryStallsInPreflight(t *testing.T) {
	d := newDriver(t)
	d.c.target("app")
	before := templateJSON(t, d.c.ns, "app")
	e := shortExperiment(d.c.ns, "app", envToggle())
	e.Spec.Metrics.Queries = &perfv1.MetricQueries{Heap: `sum by (pod) (go_memstats_heap_alloc_bytes{pod=~{{pod}}})`}
	if err := k8s.Create(context.Background(), e); err != nil {
		t.Fatal(err)
	}
	exp := d.until("Stalled", func(e *perfv1.PerfExperiment) bool {
		return meta.IsStatusConditionTrue(e.Status.Conditions, perfv1.ConditionStalled)
	})
	c := meta.FindStatusCondition(exp.Status.Conditions, perfv1.ConditionStalled)
	if c.Reason != perfv1.ReasonInvalidSpec || !strings.Contains(c.Message, "spec.metrics.queries") || !strings.Contains(c.Message, "heap") {
		t.Fatalf("Stalled %s: %s", c.Reason, c.Message)
	}
	if templateJSON(t, d.c.ns, "app") != before {
		t.Error("the template changed")
	}
	assertUnlocked(t, d.c.ns)
}
