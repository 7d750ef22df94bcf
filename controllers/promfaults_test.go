package controllers_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clocktesting "k8s.io/utils/clock/testing"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	perfv1 "perfexp.dev/perf-operator/api/v1alpha1"
	"perfexp.dev/perf-operator/controllers"
	"perfexp.dev/perf-operator/internal/k6"
)

// startOperatorWith is startOperator with the reconciler's metrics source and
// k6 API client chosen by the test.
func startOperatorWith(t *testing.T, clock *clocktesting.FakeClock, src controllers.MetricsSource, load k6.LiveClient) *operator {
	t.Helper()
	mgr, err := ctrl.NewManager(env.Config, ctrl.Options{
		Scheme: scheme, Cache: controllers.CacheOptions(), Controller: ctrlConfig(),
		Metrics: metricsserver.Options{BindAddress: "0"}, HealthProbeBindAddress: "0",
	})
	if err != nil {
		t.Fatal(err)
	}
	r := &controllers.PerfExperimentReconciler{
		Client: mgr.GetClient(), APIReader: mgr.GetAPIReader(), Scheme: scheme,
		Recorder: mgr.GetEventRecorderFor("perf-operator"), Clock: clock, Metrics: src, LoadAPI: load,
	}
	if err := r.SetupWithManager(mgr); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	op := &operator{cancel: cancel, done: make(chan error, 1), cache: mgr.GetCache()}
	go func() { op.done <- mgr.Start(ctx) }()
	t.Cleanup(func() { op.stop(t) })
	return op
}

// readyTargetPods creates the target's two pods, app-1 and app-2, running and
// ready (envtest has no Deployment controller or kubelet to make them).
func readyTargetPods(t *testing.T, c *cluster, clock *clocktesting.FakeClock) {
	t.Helper()
	for _, name := range []string{"app-1", "app-2"} {
		pod := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: c.ns, Labels: map[string]string{"app": "app"}},
			Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "registry.local/app:1"}}},
		}
		if err := k8s.Create(context.Background(), pod); err != nil {
			t.Fatal(err)
		}
		started := metav1.NewTime(clock.Now().Add(-time.Hour))
		pod.Status = corev1.PodStatus{
			Phase: corev1.PodRunning, PodIP: "10.1.0." + name[len(name)-1:],
			Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}},
			ContainerStatuses: []corev1.ContainerStatus{{Name: "app", Ready: true,
				State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: started}}}},
		}
		if err := k8s.Status().Update(context.Background(), pod); err != nil {
			t.Fatal(err)
		}
	}
}

// fakePrometheus answers the Prometheus query API for the target's two pods:
// 0.40 cores each (0.42 with the toggle on), a 2.2 GB working set, no heap
// metric. While the toggle is on it misbehaves as fault says.
type fakePrometheus struct {
	*httptest.Server
	ns, fault string
	calls     atomic.Int64
}

func newFakePrometheus(t *testing.T, ns, fault string) *fakePrometheus {
	f := &fakePrometheus{ns: ns, fault: fault}
	f.Server = httptest.NewServer(http.HandlerFunc(f.serve))
	t.Cleanup(f.Close)
	return f
}

func (f *fakePrometheus) serve(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path != "/api/v1/query" || r.ParseForm() != nil {
		http.NotFound(w, r)
		return
	}
	q := r.Form.Get("query")
	w.Header().Set("Content-Type", "application/json")
	if q == "vector(1)" {
		fmt.Fprint(w, `{"status":"success","data":{"resultType":"vector","result":[{"metric":{},"value":[1,"1"]}]}}`)
		return
	}
	dep := &appsv1.Deployment{}
	if err := k8s.Get(r.Context(), client.ObjectKey{Namespace: f.ns, Name: "app"}, dep); err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	on := false
	for _, e := range dep.Spec.Template.Spec.Containers[0].Env {
		on = on || e.Name == "PROFILING"
	}
	fault := ""
	if on {
		fault = f.fault
	}
	if fault == "500" {
		w.WriteHeader(http.StatusInternalServerError)
		fmt.Fprint(w, `{"status":"error","errorType":"internal","error":"query processing failed"}`)
		return
	}
	// A little wobble, so the comparison has a spread to work with.
	wobble := 0.002 * float64(f.calls.Add(1)%5-2)
	values := map[string]string{}
	switch {
	case strings.Contains(q, "container_cpu_usage_seconds_total"):
		cpu := 0.40
		if on {
			cpu = 0.42
		}
		values["app-1"], values["app-2"] = fmt.Sprint(cpu+wobble), fmt.Sprint(cpu-wobble)
		if fault == "NaN" {
			values["app-2"] = "NaN"
		}
	case strings.Contains(q, "container_memory_working_set_bytes"):
		values["app-1"], values["app-2"] = "2.2e9", "2.2e9"
		if fault == "+Inf" {
			values["app-2"] = "+Inf"
		}
	}
	switch fault {
	case "one pod":
		delete(values, "app-2")
	case "empty":
		clear(values)
	}
	var series []string
	for _, pod := range []string{"app-1", "app-2"} {
		if v, ok := values[pod]; ok {
			series = append(series, fmt.Sprintf(`{"metric":{"pod":%q},"value":[1,%q]}`, pod, v))
		}
	}
	fmt.Fprintf(w, `{"status":"success","data":{"resultType":"vector","result":[%s]}}`, strings.Join(series, ","))
}

// Prometheus misbehaving during treatment — answering for 1 of 2 pods, NaN,
// +Inf, nothing, HTTP 500 — leaves the treatment window invalid, the verdict
// Inconclusive and Passed Unknown; a healthy Prometheus gives Pass. A real HTTP
// server stands in for Prometheus and the operator queries it through the
// production client and metrics.Choose.
func TestPrometheusFaultsNeverGiveAVerdict(t *testing.T) {
	for _, tc := range []struct {
		fault string
		// problem is a part of the treatment window's Invalid entry; "" for a
		// healthy source.
		problem string
	}{
		{"", ""},
		{"one pod", "1 of 2 pods without usable values (pod app-2: cpu no value, memory no value)"},
		{"NaN", "1 of 2 pods without usable values (pod app-2: cpu no value)"},
		{"+Inf", "1 of 2 pods without usable values (pod app-2: memory +Inf)"},
		{"empty", "prometheus returned no samples for the target's pods"},
		{"500", "HTTP 500 Internal Server Error from /api/v1/query: internal: query processing failed"},
	} {
		name := tc.fault
		if name == "" {
			name = "healthy"
		}
		t.Run(name, func(t *testing.T) {
			clock := newTestClock()
			d := &driver{t: t, c: newCluster(t, clock), clock: clock, name: "overhead", step: 15 * time.Second}
			d.c.target("app")
			readyTargetPods(t, d.c, clock)
			prom := newFakePrometheus(t, d.c.ns, tc.fault)
			d.op = startOperatorWith(t, clock, controllers.ClusterMetrics{}, k6.LiveClient{})
			e := shortExperiment(d.c.ns, "app", envToggle())
			e.Spec.Stages = []perfv1.StageSpec{{QPS: 100}}
			// The rate's range is 1m: a window needs a few minutes for points
			// whose range lies wholly inside it.
			e.Spec.Windows = perfv1.WindowsSpec{Baseline: "3m", Treatment: "3m", Settle: "10s"}
			e.Spec.Metrics = perfv1.MetricsSpec{Source: perfv1.MetricsSourcePrometheus, Interval: "15s",
				Prometheus: &perfv1.PrometheusSpec{URL: prom.URL}}
			e.Spec.SuccessCriteria = &perfv1.SuccessCriteria{MaxCPUOverhead: "10%"}
			if err := k8s.Create(context.Background(), e); err != nil {
				t.Fatal(err)
			}
			exp := d.until("the end", terminal)
			st := exp.Status
			if st.Phase != perfv1.PhaseSucceeded || st.Abort != nil {
				t.Fatalf("phase %s, abort %+v", st.Phase, st.Abort)
			}
			passed := meta.FindStatusCondition(st.Conditions, perfv1.ConditionPassed)
			for _, w := range st.Windows {
				if w.Variant != perfv1.VariantBaseline && w.Variant != perfv1.VariantTreatment {
					continue
				}
				valid := w.Valid != nil && *w.Valid
				if w.Variant == perfv1.VariantBaseline || tc.problem == "" {
					if !valid || w.Series == nil || w.Series.Points < 3 {
						t.Fatalf("%s window: valid %v, invalid %q, series %+v", w.Variant, valid, w.Invalid, w.Series)
					}
					continue
				}
				if valid || len(w.Invalid) != 1 || !strings.HasPrefix(w.Invalid[0], "metrics for only ") ||
					!strings.Contains(w.Invalid[0], " of 12 samples: ") || !strings.Contains(w.Invalid[0], tc.problem) {
					t.Fatalf("treatment window: valid %v, invalid %q; want the missing samples and %q", valid, w.Invalid, tc.problem)
				}
				if w.Series != nil && w.Series.Points > 0 {
					t.Fatalf("treatment window summed incomplete instants: %s", w.Series.CPU)
				}
			}
			if tc.problem == "" {
				if st.Verdict != perfv1.VerdictPass || passed == nil || passed.Status != metav1.ConditionTrue {
					t.Fatalf("healthy source: verdict %s, Passed %+v, summary %+v", st.Verdict, passed, st.Summary)
				}
				return
			}
			if st.Verdict != perfv1.VerdictInconclusive || len(st.Summary) != 1 || st.Summary[0].Trustworthy {
				t.Fatalf("verdict %s, summary %+v", st.Verdict, st.Summary)
			}
			if passed == nil || passed.Status != metav1.ConditionUnknown || passed.Reason != perfv1.ReasonInconclusive {
				t.Fatalf("Passed %+v", passed)
			}
		})
	}
}
