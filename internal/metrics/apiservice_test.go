package metrics

import (
	"context"
	"encoding/json"
	"math"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	metricsv1beta1 "k8s.io/metrics/pkg/apis/metrics/v1beta1"
	metricsclientset "k8s.io/metrics/pkg/client/clientset/versioned"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
)

// TestMetricsServerThroughAPIService reads PodMetrics through a real
// kube-apiserver's aggregation layer: an APIService v1beta1.metrics.k8s.io
// (insecureSkipTLSVerify) backed by an httptest TLS server that plays
// metrics-server. The Service is of type ExternalName "localhost": the
// aggregator resolves it to https://localhost:<port>, while a selector-less
// Service with an EndpointSlice cannot point at 127.0.0.1 (EndpointSlice
// validation refuses loopback addresses) and a ClusterIP needs kube-proxy.
func TestMetricsServerThroughAPIService(t *testing.T) {
	assets := os.Getenv("KUBEBUILDER_ASSETS")
	if assets == "" {
		assets = filepath.Join("..", "..", "bin")
	}
	for _, b := range []string{"kube-apiserver", "etcd"} {
		if _, err := os.Stat(filepath.Join(assets, b)); err != nil {
			t.Fatalf("%s not found in %s: run `hack/tools.sh kube` (or `make tools`) to build it: %v", b, assets, err)
		}
	}

	now := time.Now().UTC().Truncate(time.Second)
	backend := fakeMetricsServer(t, []metricsv1beta1.PodMetrics{
		*podMetrics("shop", "api-1", map[string]string{"app": "api"}, now, usage("app", "250m", "300Mi"), usage("istio-proxy", "50m", "20Mi")),
		*podMetrics("shop", "api-2", map[string]string{"app": "api"}, now, usage("app", "1", "1Gi")),
		*podMetrics("shop", "web-1", map[string]string{"app": "web"}, now, usage("app", "2", "2Gi")),
	})
	_, port, err := net.SplitHostPort(backend.Listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}

	began := time.Now()
	env := &envtest.Environment{BinaryAssetsDirectory: assets}
	cfg, err := env.Start()
	if err != nil {
		_ = env.Stop()
		t.Fatalf("starting envtest: %v", err)
	}
	t.Cleanup(func() { _ = env.Stop() })
	t.Logf("envtest up in %s", time.Since(began).Round(time.Millisecond))

	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	kube := kubernetes.NewForConfigOrDie(cfg)
	if _, err := kube.CoreV1().Services("default").Create(ctx, &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "metrics-server"},
		Spec:       corev1.ServiceSpec{Type: corev1.ServiceTypeExternalName, ExternalName: "localhost"},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	portNum, err := strconv.ParseInt(port, 10, 32)
	if err != nil {
		t.Fatal(err)
	}
	apiService := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "apiregistration.k8s.io/v1",
		"kind":       "APIService",
		"metadata":   map[string]any{"name": "v1beta1.metrics.k8s.io"},
		"spec": map[string]any{
			"group": "metrics.k8s.io", "version": "v1beta1",
			"service":               map[string]any{"namespace": "default", "name": "metrics-server", "port": portNum},
			"insecureSkipTLSVerify": true,
			"groupPriorityMinimum":  int64(100),
			"versionPriority":       int64(100),
		},
	}}
	gvr := schema.GroupVersionResource{Group: "apiregistration.k8s.io", Version: "v1", Resource: "apiservices"}
	dyn := dynamic.NewForConfigOrDie(cfg)
	if _, err := dyn.Resource(gvr).Create(ctx, apiService, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	// The aggregator marks the APIService Available once the backend answers
	// discovery; PodMetrics requests 503 until then. Bounded wait.
	p := NewMetricsServer(metricsclientset.NewForConfigOrDie(cfg))
	tgt := Target{Namespace: "shop", PodSelector: "app=api", Container: "app"}
	var got []Sample
	deadline := time.Now().Add(30 * time.Second)
	for {
		got, err = p.Sample(ctx, tgt)
		if err == nil || time.Now().After(deadline) {
			break
		}
		time.Sleep(200 * time.Millisecond)
	}
	if err != nil {
		as, _ := dyn.Resource(gvr).Get(ctx, "v1beta1.metrics.k8s.io", metav1.GetOptions{})
		t.Fatalf("sampling through the APIService: %v; APIService status: %v", err, as.Object["status"])
	}
	t.Logf("sampled through the aggregator %s after start", time.Since(began).Round(time.Millisecond))
	if len(got) != 2 {
		t.Fatalf("got %+v, want api-1 and api-2", got)
	}
	want := []Sample{
		{Time: now, Window: 15 * time.Second, Pod: "api-1", CPUCores: 0.25, WorkingSetBytes: 300 << 20, HeapBytes: math.NaN(), GCSecondsPerSecond: math.NaN()},
		{Time: now, Window: 15 * time.Second, Pod: "api-2", CPUCores: 1, WorkingSetBytes: 1 << 30, HeapBytes: math.NaN(), GCSecondsPerSecond: math.NaN()},
	}
	for i := range want {
		if !sameSample(got[i], want[i]) {
			t.Errorf("sample %d: got %+v, want %+v", i, got[i], want[i])
		}
	}

	// An APIService whose backend is gone: the error names the source and the status.
	backend.Close()
	deadline = time.Now().Add(30 * time.Second)
	for {
		_, err = p.Sample(ctx, tgt)
		if err != nil || time.Now().After(deadline) {
			break
		}
		time.Sleep(200 * time.Millisecond)
	}
	if err == nil || !strings.Contains(err.Error(), "metrics-server: listing metrics.k8s.io/v1beta1 PodMetrics") || !strings.Contains(err.Error(), "HTTP 503") {
		t.Errorf("backend down: err = %v, want a metrics-server error with HTTP 503", err)
	}
	t.Logf("backend down: %v", err)
}

// fakeMetricsServer serves the metrics.k8s.io/v1beta1 discovery document and
// namespaced PodMetrics lists (with label selectors) over TLS on 127.0.0.1.
func fakeMetricsServer(t *testing.T, pods []metricsv1beta1.PodMetrics) *httptest.Server {
	t.Helper()
	const prefix = "/apis/metrics.k8s.io/v1beta1"
	writeJSON := func(w http.ResponseWriter, v any) {
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(v)
	}
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		path := strings.TrimSuffix(r.URL.Path, "/")
		switch {
		case path == prefix:
			writeJSON(w, metav1.APIResourceList{
				TypeMeta:     metav1.TypeMeta{Kind: "APIResourceList", APIVersion: "v1"},
				GroupVersion: "metrics.k8s.io/v1beta1",
				APIResources: []metav1.APIResource{
					{Name: "pods", Namespaced: true, Kind: "PodMetrics", Verbs: metav1.Verbs{"get", "list"}},
					{Name: "nodes", Kind: "NodeMetrics", Verbs: metav1.Verbs{"get", "list"}},
				},
			})
		case strings.HasPrefix(path, prefix+"/namespaces/") && strings.HasSuffix(path, "/pods"):
			ns := strings.TrimSuffix(strings.TrimPrefix(path, prefix+"/namespaces/"), "/pods")
			sel, err := labels.Parse(r.URL.Query().Get("labelSelector"))
			if err != nil {
				http.Error(w, err.Error(), http.StatusBadRequest)
				return
			}
			list := metricsv1beta1.PodMetricsList{TypeMeta: metav1.TypeMeta{Kind: "PodMetricsList", APIVersion: "metrics.k8s.io/v1beta1"}}
			for _, p := range pods {
				if p.Namespace == ns && sel.Matches(labels.Set(p.Labels)) {
					list.Items = append(list.Items, p)
				}
			}
			writeJSON(w, list)
		default:
			http.NotFound(w, r)
		}
	}))
	t.Cleanup(srv.Close)
	return srv
}
