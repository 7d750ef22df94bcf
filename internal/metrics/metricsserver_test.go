package metrics

import (
	"context"
	"math"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	k8stesting "k8s.io/client-go/testing"
	metricsv1beta1 "k8s.io/metrics/pkg/apis/metrics/v1beta1"
	metricsfake "k8s.io/metrics/pkg/client/clientset/versioned/fake"
)

var t0 = time.Date(2030, 1, 2, 3, 4, 0, 0, time.UTC)

func podMetrics(ns, name string, labels map[string]string, ts time.Time, containers ...metricsv1beta1.ContainerMetrics) *metricsv1beta1.PodMetrics {
	return &metricsv1beta1.PodMetrics{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: labels},
		Timestamp:  metav1.NewTime(ts),
		Window:     metav1.Duration{Duration: 15 * time.Second},
		Containers: containers,
	}
}

func usage(name, cpu, mem string) metricsv1beta1.ContainerMetrics {
	u := corev1.ResourceList{}
	if cpu != "" {
		u[corev1.ResourceCPU] = resource.MustParse(cpu)
	}
	if mem != "" {
		u[corev1.ResourceMemory] = resource.MustParse(mem)
	}
	return metricsv1beta1.ContainerMetrics{Name: name, Usage: u}
}

// fakeMetrics returns a fake clientset holding the objects. The generated
// fake's NewSimpleClientset files PodMetrics under the guessed resource
// "podmetricses" while the typed client asks for "pods", so the objects are
// created under the real resource.
func fakeMetrics(t *testing.T, objs ...*metricsv1beta1.PodMetrics) *metricsfake.Clientset {
	t.Helper()
	c := metricsfake.NewSimpleClientset()
	gvr := metricsv1beta1.SchemeGroupVersion.WithResource("pods")
	for _, o := range objs {
		if err := c.Tracker().Create(gvr, o, o.Namespace); err != nil {
			t.Fatal(err)
		}
	}
	return c
}

func TestMetricsServerSample(t *testing.T) {
	app := map[string]string{"app": "api"}
	c := fakeMetrics(t,
		podMetrics("shop", "api-1", app, t0, usage("app", "250m", "300Mi"), usage("istio-proxy", "100m", "30Mi")),
		podMetrics("shop", "api-2", app, t0.Add(3*time.Second), usage("app", "1500m", "1Gi")),
		podMetrics("shop", "api-3", app, t0, usage("istio-proxy", "1", "1Gi")),                     // no app container
		podMetrics("shop", "api-old", app, t0, usage("app", "2", "2Gi")),                           // not in Target.Pods
		podMetrics("shop", "web-1", map[string]string{"app": "web"}, t0, usage("app", "3", "3Gi")), // other selector
		podMetrics("other", "api-1", app, t0, usage("app", "4", "4Gi")),                            // other namespace
	)
	p := NewMetricsServer(c)
	if p.Name() != "metrics-server" {
		t.Errorf("Name = %q", p.Name())
	}
	got, err := p.Sample(context.Background(), Target{Namespace: "shop", PodSelector: "app=api", Container: "app", Pods: []string{"api-2", "api-1", "api-3", "web-1"}})
	if err != nil {
		t.Fatal(err)
	}
	latest := t0.Add(3 * time.Second)
	want := []Sample{
		{Time: latest, Window: 15 * time.Second, Pod: "api-1", CPUCores: 0.25, WorkingSetBytes: 300 << 20, HeapBytes: math.NaN(), GCSecondsPerSecond: math.NaN()},
		{Time: latest, Window: 15 * time.Second, Pod: "api-2", CPUCores: 1.5, WorkingSetBytes: 1 << 30, HeapBytes: math.NaN(), GCSecondsPerSecond: math.NaN()},
	}
	if len(got) != len(want) {
		t.Fatalf("got %+v, want %+v", got, want)
	}
	for i := range want {
		if !sameSample(got[i], want[i]) {
			t.Errorf("sample %d: got %+v, want %+v", i, got[i], want[i])
		}
	}
	lists := 0
	for _, a := range c.Actions() {
		if a.GetVerb() == "list" {
			lists++
			if a.GetNamespace() != "shop" || a.(k8stesting.ListAction).GetListRestrictions().Labels.String() != "app=api" {
				t.Errorf("list %s in %q with %v", a.GetResource(), a.GetNamespace(), a.(k8stesting.ListAction).GetListRestrictions())
			}
		}
	}
	if lists != 1 || len(c.Actions()) != 1 {
		t.Errorf("%d API calls (%d lists), want one list", len(c.Actions()), lists)
	}

	// Without Target.Pods every pod the selector matches counts.
	got, err = p.Sample(context.Background(), Target{Namespace: "shop", PodSelector: "app=api", Container: "app"})
	if err != nil {
		t.Fatal(err)
	}
	var pods []string
	for _, s := range got {
		pods = append(pods, s.Pod)
	}
	if strings.Join(pods, ",") != "api-1,api-2,api-old" {
		t.Errorf("pods without a filter: %v", pods)
	}
}

func TestMetricsServerMissingUsage(t *testing.T) {
	c := fakeMetrics(t,
		podMetrics("shop", "cpu-only", nil, t0, usage("app", "100m", "")),
		podMetrics("shop", "none", nil, t0, usage("app", "", "")),
	)
	got, err := NewMetricsServer(c).Sample(context.Background(), Target{Namespace: "shop", Container: "app"})
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 || got[0].Pod != "cpu-only" || got[0].CPUCores != 0.1 || !math.IsNaN(got[0].WorkingSetBytes) {
		t.Errorf("got %+v, want cpu-only with unknown memory", got)
	}
}

func TestMetricsServerErrors(t *testing.T) {
	gr := schema.GroupResource{Group: "metrics.k8s.io", Resource: "pods"}
	tests := []struct {
		name string
		err  error
		want string
	}{
		{"not installed", apierrors.NewNotFound(gr, ""), `metrics-server: listing metrics.k8s.io/v1beta1 PodMetrics in namespace "shop" with selector "app=api": HTTP 404:`},
		{"not installed hint", apierrors.NewNotFound(gr, ""), "is metrics-server installed"},
		{"backend down", apierrors.NewServiceUnavailable("the server is currently unable to handle the request"), "HTTP 503: the server is currently unable to handle the request (the APIService"},
		{"rbac", apierrors.NewForbidden(gr, "", nil), "HTTP 403"},
		{"transport", context.DeadlineExceeded, `selector "app=api": context deadline exceeded`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c := metricsfake.NewSimpleClientset()
			c.PrependReactor("list", "pods", func(k8stesting.Action) (bool, runtime.Object, error) { return true, nil, tc.err })
			_, err := NewMetricsServer(c).Sample(context.Background(), Target{Namespace: "shop", PodSelector: "app=api", Container: "app"})
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want it to contain %q", err, tc.want)
			}
			if n := len(c.Actions()); n != 1 {
				t.Errorf("%d calls, want 1 (no retries)", n)
			}
		})
	}
	if _, err := NewMetricsServer(metricsfake.NewSimpleClientset()).Sample(context.Background(), Target{Namespace: "shop"}); err == nil {
		t.Error("a target without a container was accepted")
	}
}
