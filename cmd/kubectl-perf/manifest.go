package main

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/yaml"

	perfv1 "perfexp.dev/perf-operator/api/v1alpha1"
)

// loadExperiments reads every PerfExperiment of a manifest file offline (all of
// its YAML documents; other kinds, such as the target's Deployment beside it,
// are skipped), applies the same defaults the apiserver would and refuses one,
// naming the document and the field, when the CRD would. Without a path it
// returns one minimal experiment carrying the defaults.
func loadExperiments(path string) ([]*perfv1.PerfExperiment, error) {
	if path == "" {
		exp := &perfv1.PerfExperiment{}
		exp.Default()
		return []*perfv1.PerfExperiment{exp}, nil
	}
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var (
		out     []*perfv1.PerfExperiment
		skipped []string // the kinds of the other documents
	)
	r := utilyaml.NewYAMLReader(bufio.NewReader(f))
	for doc := 1; ; doc++ {
		b, err := r.Read()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("%s: document %d: %w", path, doc, err)
		}
		if len(bytes.TrimSpace(b)) == 0 {
			continue
		}
		var meta struct{ Kind string }
		if err := yaml.Unmarshal(b, &meta); err != nil {
			return nil, fmt.Errorf("%s: document %d: %w", path, doc, err)
		}
		if meta.Kind != "PerfExperiment" {
			if meta.Kind == "" {
				meta.Kind = "none"
			}
			skipped = append(skipped, meta.Kind)
			continue
		}
		exp := &perfv1.PerfExperiment{}
		if err := yaml.UnmarshalStrict(b, exp); err != nil {
			return nil, fmt.Errorf("%s: document %d: %w", path, doc, err)
		}
		exp.Default()
		if errs := exp.Validate(); len(errs) > 0 {
			return nil, fmt.Errorf("%s: document %d (%s): %v", path, doc, exp.Name, errs.ToAggregate())
		}
		out = append(out, exp)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("%s: no PerfExperiment among its documents (kinds: %s)", path, strings.Join(skipped, ", "))
	}
	return out, nil
}

// loadExperiment reads a manifest that must hold exactly one PerfExperiment.
func loadExperiment(path string) (*perfv1.PerfExperiment, error) {
	exps, err := loadExperiments(path)
	if err != nil {
		return nil, err
	}
	if len(exps) != 1 {
		return nil, fmt.Errorf("%s holds %d PerfExperiments; want one", path, len(exps))
	}
	return exps[0], nil
}
