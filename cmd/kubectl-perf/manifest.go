package main

import (
	"fmt"
	"os"

	"sigs.k8s.io/yaml"

	perfv1 "perfexp.dev/perf-operator/api/v1alpha1"
)

// loadExperiment reads a PerfExperiment manifest offline, applies the same
// defaults the apiserver would and refuses it, naming the field, when the CRD
// would. Without a path it returns a minimal experiment carrying the defaults.
func loadExperiment(path string) (*perfv1.PerfExperiment, error) {
	exp := &perfv1.PerfExperiment{}
	if path == "" {
		exp.Default()
		return exp, nil
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	if err := yaml.UnmarshalStrict(b, exp); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if exp.Kind != "PerfExperiment" {
		return nil, fmt.Errorf("%s: kind is %q, want PerfExperiment", path, exp.Kind)
	}
	exp.Default()
	if errs := exp.Validate(); len(errs) > 0 {
		return nil, fmt.Errorf("%s: %v", path, errs.ToAggregate())
	}
	return exp, nil
}
