// Package v1alpha1 holds the PerfExperiment API: a controlled performance
// experiment that measures what a toggle (an env var, a JVM option, container args or
// a runtime HTTP switch) costs a Deployment under fixed-rate load, and stops itself
// before it takes the service down.
//
// +kubebuilder:object:generate=true
// +groupName=perfexp.dev
package v1alpha1

import (
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/scheme"
)

var (
	// GroupVersion is the group and version of every type in this package.
	GroupVersion = schema.GroupVersion{Group: "perfexp.dev", Version: "v1alpha1"}

	// SchemeBuilder registers the package's types with a runtime.Scheme.
	SchemeBuilder = &scheme.Builder{GroupVersion: GroupVersion}

	// AddToScheme adds the package's types to a scheme.
	AddToScheme = SchemeBuilder.AddToScheme
)
