package k6

import (
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	perfv1 "perfexp.dev/perf-operator/api/v1alpha1"
)

// testExperiment is a defaulted experiment with two weighted generated requests.
func testExperiment() *perfv1.PerfExperiment {
	exp := &perfv1.PerfExperiment{
		ObjectMeta: metav1.ObjectMeta{Name: "profiling-overhead", Namespace: "shop"},
		Spec: perfv1.PerfExperimentSpec{
			Target: perfv1.TargetSpec{Deployment: "mall-gateway", URL: "http://mall-gateway.shop.svc:8080/"},
			Load: perfv1.LoadSpec{Requests: []perfv1.RequestSpec{
				{Path: "/api/items?page=1", Weight: 3},
				{Method: "POST", Path: "/api/orders", Body: `{"item":42}`, Headers: []perfv1.HTTPHeader{
					{Name: "Content-Type", Value: "application/json"},
					{Name: "X-Request-Source", Value: "perf-operator"},
				}},
			}},
			Stages: []perfv1.StageSpec{{QPS: 500}, {QPS: 1000}},
			Toggle: &perfv1.ToggleSpec{JVMOption: "-XX:+UseSerialGC"},
		},
	}
	exp.Default()
	return exp
}

// withScriptRef turns exp into one that runs the user's script from ConfigMap
// "my-load", key "load.js".
func withScriptRef(exp *perfv1.PerfExperiment) *perfv1.PerfExperiment {
	exp.Spec.Load.Requests = nil
	exp.Spec.Load.ScriptRef = &perfv1.ScriptRef{Name: "my-load", Key: "load.js"}
	return exp
}

var baseline1 = Window{Stage: 1, Variant: perfv1.VariantBaseline, QPS: 500, Duration: 30 * time.Minute}
