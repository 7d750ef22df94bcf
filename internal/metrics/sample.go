// Package metrics takes resource samples of the target's pods from metrics.k8s.io
// or Prometheus, behind one narrow interface.
package metrics

import (
	"context"
	"math"
	"time"
)

// Sample is one observation of one target pod's container. Unknown values are
// NaN (a metrics-server has no heap; a limit may be unset).
type Sample struct {
	// Time is when the values were measured (the source's timestamp).
	Time time.Time
	// Window is the period CPUCores is averaged over, ending at Time (a rate's
	// range, metrics-server's window); zero for an instantaneous value. A sample
	// describes a measurement window only when all of [Time−Window, Time] lies in
	// it: the first samples after a change of load still average in the load
	// before it.
	Window time.Duration
	// Pod is the pod's name.
	Pod string
	// CPUCores is the container's CPU use in cores.
	CPUCores float64
	// WorkingSetBytes is the container's working set (what the OOM killer sees).
	WorkingSetBytes float64
	// HeapBytes is the runtime's heap in use, NaN when the app exports none.
	HeapBytes float64
	// GCSecondsPerSecond is the share of time the runtime spent collecting
	// garbage (seconds of GC per second, over the same period as CPUCores),
	// NaN when the app exports no GC timing.
	GCSecondsPerSecond float64
}

// Unknown is the value of a measurement the source does not have.
var Unknown = math.NaN()

// Target says whose samples to take.
type Target struct {
	Namespace string
	// Pods are the target pods' names (the running pods of the Deployment).
	Pods []string
	// PodSelector is the Deployment's selector in label-selector syntax.
	PodSelector string
	// Container is the measured container's name.
	Container string
}

// Provider takes one sample of every target pod. Implementations make a bounded
// number of API calls per Sample (one list for metrics.k8s.io, one query per
// metric for Prometheus) and never retry in a loop: the caller samples again on
// its next interval.
type Provider interface {
	// Name is the source's name as recorded in status: metrics-server or prometheus.
	Name() string
	// Sample returns one sample per target pod it has data for.
	Sample(ctx context.Context, t Target) ([]Sample, error)
}
