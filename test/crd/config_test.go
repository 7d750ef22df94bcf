package crd

import (
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"perfexp.dev/perf-operator/internal/testenv"
)

// Every manifest under config/ is valid for the apiserver we pin (a server-side
// dry run validates against the real schemas; no schema download is needed).
func TestConfigManifestsPassServerSideDryRun(t *testing.T) {
	var files []string
	err := filepath.WalkDir(filepath.Join(testenv.RepoRoot(), "config"), func(p string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() && filepath.Ext(p) == ".yaml" && filepath.Base(p) != "kustomization.yaml" {
			files = append(files, p)
		}
		return err
	})
	if err != nil || len(files) == 0 {
		t.Fatalf("no manifests under config/: %v", err)
	}
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) {
			b, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(b), 4096)
			for {
				u := &unstructured.Unstructured{}
				if err := dec.Decode(&u.Object); errors.Is(err, io.EOF) {
					break
				} else if err != nil {
					t.Fatal(err)
				}
				if len(u.Object) == 0 {
					continue
				}
				if u.GetKind() == "CustomResourceDefinition" {
					// Installed by the test environment already; a dry-run
					// update proves it is still acceptable.
					cur := &unstructured.Unstructured{}
					cur.SetGroupVersionKind(u.GroupVersionKind())
					if err := k8s.Get(context.Background(), client.ObjectKeyFromObject(u), cur); err != nil {
						t.Fatal(err)
					}
					u.SetResourceVersion(cur.GetResourceVersion())
					if err := k8s.Update(context.Background(), u, client.DryRunAll); err != nil {
						t.Fatalf("%s: %v", u.GetName(), err)
					}
					continue
				}
				// Namespaces are kustomize's to set (config/default) and the
				// samples name their own; dry-run every namespaced object in
				// default, which exists.
				switch u.GetKind() {
				case "ClusterRole", "ClusterRoleBinding", "Namespace":
				default:
					u.SetNamespace("default")
				}
				if err := k8s.Create(context.Background(), u, client.DryRunAll, client.FieldValidation("Strict")); err != nil {
					t.Fatalf("%s %s: %v", u.GetKind(), u.GetName(), err)
				}
			}
		})
	}
}
