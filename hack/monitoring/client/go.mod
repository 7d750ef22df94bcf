// The clients of prometheus-operator's API (module .../pkg/client), which the Go
// module proxy does not serve for the pinned version: hack/tools.sh generates them
// here from the served API module with Kubernetes' code generators, as upstream's
// `make k8s-client-gen` does. Only this file is committed.
module github.com/prometheus-operator/prometheus-operator/pkg/client

go 1.26.0

require (
	github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring v0.94.1
	k8s.io/api v0.37.0
	k8s.io/apimachinery v0.37.0
	k8s.io/client-go v0.37.0
)
