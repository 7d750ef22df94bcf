package chart

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"perfexp.dev/perf-operator/internal/testenv"
)

// valuesFiles are the values the chart is tested with: test/chart/testdata/*.yaml.
func valuesFiles(t *testing.T) []string {
	t.Helper()
	files, err := filepath.Glob(filepath.Join("testdata", "*.yaml"))
	if err != nil || len(files) < 4 {
		t.Fatalf("want at least 4 values files in testdata/, found %v (%v)", files, err)
	}
	return files
}

// runTool runs a binary with a bound that only stops a hung run, returning its
// combined output.
func runTool(bin string, args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Dir = testenv.RepoRoot()
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	return out.String(), err
}

// helmTemplate renders the chart as release perf-operator in perf-operator-system
// with the CRDs, and returns the command's output and error.
func helmTemplate(args ...string) (string, error) {
	return runTool(helm, append([]string{"template", release, chart, "--namespace", namespace, "--include-crds"}, args...)...)
}

// render renders the chart and decodes every object, failing the test on error.
func render(t *testing.T, args ...string) []*unstructured.Unstructured {
	t.Helper()
	out, err := helmTemplate(args...)
	if err != nil {
		t.Fatalf("helm template %v: %v\n%s", args, err, out)
	}
	return decode(t, out)
}

// kustomize renders a directory under config/ with the kustomize built into kubectl.
func kustomize(t *testing.T, dir string) []*unstructured.Unstructured {
	t.Helper()
	out, err := runTool(kubectl, "kustomize", dir)
	if err != nil {
		t.Fatalf("kubectl kustomize %s: %v\n%s", dir, err, out)
	}
	return decode(t, out)
}

func decode(t *testing.T, manifests string) []*unstructured.Unstructured {
	t.Helper()
	var objs []*unstructured.Unstructured
	dec := utilyaml.NewYAMLOrJSONDecoder(strings.NewReader(manifests), 4096)
	for {
		u := &unstructured.Unstructured{}
		if err := dec.Decode(&u.Object); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			t.Fatalf("decoding rendered manifests: %v", err)
		}
		if len(u.Object) > 0 {
			objs = append(objs, u)
		}
	}
	if len(objs) == 0 {
		t.Fatal("nothing rendered")
	}
	return objs
}

// find returns the rendered objects of one kind.
func find(objs []*unstructured.Unstructured, kind string) []*unstructured.Unstructured {
	var out []*unstructured.Unstructured
	for _, o := range objs {
		if o.GetKind() == kind {
			out = append(out, o)
		}
	}
	return out
}

// only returns the one object of a kind, failing when there is not exactly one.
func only(t *testing.T, objs []*unstructured.Unstructured, kind string) *unstructured.Unstructured {
	t.Helper()
	found := find(objs, kind)
	if len(found) != 1 {
		t.Fatalf("want exactly one %s, rendered %d", kind, len(found))
	}
	return found[0]
}

// into converts an object to its typed form.
func into(t *testing.T, u *unstructured.Unstructured, typed any) {
	t.Helper()
	if err := runtime.DefaultUnstructuredConverter.FromUnstructuredWithValidation(u.Object, typed, true); err != nil {
		t.Fatalf("%s %s: %v", u.GetKind(), u.GetName(), err)
	}
}

// dryRun has the apiserver validate every object as `kubectl apply
// --dry-run=server --validate=strict` would: schemas, unknown fields, admission.
// Nothing is stored. The namespaces the objects live in are created for real
// (a dry run cannot create a namespace for the next object); an object that
// exists already (our CRD, a namespace) is checked as a dry-run update.
func dryRun(t *testing.T, objs []*unstructured.Unstructured) {
	t.Helper()
	ctx := context.Background()
	for _, o := range objs {
		if ns := o.GetNamespace(); ns != "" {
			err := k8s.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})
			if err != nil && !apierrors.IsAlreadyExists(err) {
				t.Fatalf("creating namespace %s: %v", ns, err)
			}
		}
	}
	for _, o := range objs {
		o := o.DeepCopy()
		what := fmt.Sprintf("%s %s/%s", o.GetKind(), o.GetNamespace(), o.GetName())
		err := k8s.Create(ctx, o, client.DryRunAll, client.FieldValidation(metav1.FieldValidationStrict))
		if apierrors.IsAlreadyExists(err) {
			cur := &unstructured.Unstructured{}
			cur.SetGroupVersionKind(o.GroupVersionKind())
			if err = k8s.Get(ctx, client.ObjectKeyFromObject(o), cur); err == nil {
				o.SetResourceVersion(cur.GetResourceVersion())
				err = k8s.Update(ctx, o, client.DryRunAll, client.FieldValidation(metav1.FieldValidationStrict))
			}
		}
		if err != nil {
			t.Errorf("%s refused: %v", what, err)
		}
	}
}
