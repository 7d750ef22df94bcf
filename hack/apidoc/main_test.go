package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	apiextv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"sigs.k8s.io/yaml"
)

const (
	crdPath        = "../../config/crd/bases/perfexp.dev_perfexperiments.yaml"
	conditionsPath = "../../api/v1alpha1/conditions.go"
	apiDoc         = "../../docs/api.md"
)

// docs/api.md is what the generator writes from the committed CRD: a field
// added to the types shows in the reference once hack/generate.sh ran.
func TestReferenceIsUpToDate(t *testing.T) {
	raw, err := os.ReadFile(crdPath)
	if err != nil {
		t.Fatal(err)
	}
	got, err := render(raw)
	if err != nil {
		t.Fatal(err)
	}
	conds, err := conditions(conditionsPath)
	if err != nil {
		t.Fatal(err)
	}
	got = append(got, conds...)
	want, err := os.ReadFile(apiDoc)
	if err != nil {
		t.Fatal(err)
	}
	if string(got) != string(want) {
		t.Fatalf("%s is stale: run hack/generate.sh", filepath.Clean(apiDoc))
	}
}

// Every field of the schema has a row under its object's heading, every
// object link has its heading, and every condition type is listed.
func TestReferenceCoversEveryField(t *testing.T) {
	raw, err := os.ReadFile(crdPath)
	if err != nil {
		t.Fatal(err)
	}
	var crd apiextv1.CustomResourceDefinition
	if err := yaml.Unmarshal(raw, &crd); err != nil {
		t.Fatal(err)
	}
	doc, err := os.ReadFile(apiDoc)
	if err != nil {
		t.Fatal(err)
	}
	sections := map[string]string{}
	for _, s := range strings.Split(string(doc), "\n## `")[1:] {
		head, body, _ := strings.Cut(s, "`")
		sections[head] = body
	}
	var walk func(path string, s apiextv1.JSONSchemaProps)
	walk = func(path string, s apiextv1.JSONSchemaProps) {
		if _, ok := upstream[path]; ok {
			return
		}
		for name, p := range s.Properties {
			if !strings.Contains(sections[path], "| `"+name+"`") {
				t.Errorf("no row for %s.%s", path, name)
			}
			child := path + "." + name
			if p.Type == "array" && p.Items != nil && p.Items.Schema != nil {
				if len(p.Items.Schema.Properties) > 0 {
					walk(child+"[]", *p.Items.Schema)
				}
				continue
			}
			if len(p.Properties) > 0 {
				walk(child, p)
			}
		}
	}
	root := crd.Spec.Versions[0].Schema.OpenAPIV3Schema
	walk("spec", root.Properties["spec"])
	walk("status", root.Properties["status"])
	for _, c := range []string{"Ready", "Reconciling", "Stalled", "Complete", "Passed"} {
		if !strings.Contains(string(doc), "| `"+c+"` |") {
			t.Errorf("condition %s is not listed", c)
		}
	}
	for _, r := range []string{"Queued", "Inconclusive", "NoVerdict", "Aborted"} {
		if !strings.Contains(string(doc), "| `"+r+"` |") {
			t.Errorf("reason %s is not listed", r)
		}
	}
}
