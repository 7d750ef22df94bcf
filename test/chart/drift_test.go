package chart

import (
	"bytes"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"

	"perfexp.dev/perf-operator/internal/testenv"
)

// The chart installs the CRD controller-gen generates, byte for byte.
func TestChartCRDIsTheGeneratedOne(t *testing.T) {
	gen, err := os.ReadFile(filepath.Join(testenv.RepoRoot(), "config", "crd", "bases", "perfexp.dev_perfexperiments.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	files, err := filepath.Glob(filepath.Join(chart, "crds", "*"))
	if err != nil || len(files) != 1 {
		t.Fatalf("want exactly one file in the chart's crds/, found %v (%v)", files, err)
	}
	got, err := os.ReadFile(files[0])
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, gen) {
		t.Fatalf("%s differs from config/crd/bases/perfexp.dev_perfexperiments.yaml: run hack/generate.sh", files[0])
	}
}

// rule is one granted (apiGroup, resource, verb) triple; RBAC rules are unions of
// them, so comparing sets of triples compares what is granted, whatever the order
// or grouping of the rules.
type rule struct{ group, resource, verb string }

func grants(t *testing.T, rules []rbacv1.PolicyRule) map[rule]bool {
	t.Helper()
	out := map[rule]bool{}
	for _, r := range rules {
		if len(r.ResourceNames) > 0 || len(r.NonResourceURLs) > 0 {
			t.Fatalf("rule %v: resourceNames and nonResourceURLs are not expected here", r)
		}
		for _, g := range r.APIGroups {
			for _, res := range r.Resources {
				for _, v := range r.Verbs {
					out[rule{g, res, v}] = true
				}
			}
		}
	}
	return out
}

func rulesOf(t *testing.T, u *unstructured.Unstructured) []rbacv1.PolicyRule {
	t.Helper()
	switch u.GetKind() {
	case "ClusterRole":
		var r rbacv1.ClusterRole
		into(t, u, &r)
		return r.Rules
	case "Role":
		var r rbacv1.Role
		into(t, u, &r)
		return r.Rules
	}
	t.Fatalf("%s is not a role", u.GetKind())
	return nil
}

func readYAML(t *testing.T, path string, into any) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.UnmarshalStrict(b, into); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
}

// The chart grants the manager exactly what the controllers' kubebuilder markers
// declare (config/rbac/role.yaml), in both scopes, and leader election exactly
// what config/rbac grants it.
func TestChartRBACEqualsTheGeneratedRole(t *testing.T) {
	var generated rbacv1.ClusterRole
	readYAML(t, filepath.Join(testenv.RepoRoot(), "config", "rbac", "role.yaml"), &generated)
	want := grants(t, generated.Rules)
	if len(want) == 0 {
		t.Fatal("config/rbac/role.yaml grants nothing")
	}
	var leader rbacv1.Role
	readYAML(t, filepath.Join(testenv.RepoRoot(), "config", "rbac", "leader_election_role.yaml"), &leader)
	var exec rbacv1.ClusterRole
	readYAML(t, filepath.Join(testenv.RepoRoot(), "config", "rbac", "exec", "exec_role.yaml"), &exec)
	withExec := grants(t, append(slices.Clone(generated.Rules), exec.Rules...))
	if len(withExec) != len(want)+2 {
		t.Fatalf("config/rbac/exec/exec_role.yaml should add exactly get and create on pods/exec, adds %d grants", len(withExec)-len(want))
	}

	for _, tc := range []struct {
		name    string
		args    []string
		kind    string
		holders []string // namespaces of the manager's roles; "" for cluster-wide
		exec    bool     // toggles.exec.enabled
	}{
		{"cluster", nil, "ClusterRole", []string{""}, false},
		{"namespaced", []string{"-f", "test/chart/testdata/namespaced.yaml"}, "Role", []string{"team-a", "team-b"}, false},
		{"cluster with exec", []string{"--set", "toggles.exec.enabled=true"}, "ClusterRole", []string{""}, true},
		{"namespaced with exec", []string{"-f", "test/chart/testdata/exec.yaml"}, "Role", []string{"team-a"}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			want := want
			if tc.exec {
				want = withExec
			}
			objs := render(t, tc.args...)
			var holders []string
			for _, r := range find(objs, tc.kind) {
				if strings.HasSuffix(r.GetName(), "-view") || strings.HasSuffix(r.GetName(), "-edit") || strings.HasSuffix(r.GetName(), "-metrics-reader") {
					continue // the tenants' aggregate roles (TestAggregateRoles), the metrics reader
				}
				if strings.HasSuffix(r.GetName(), "-leader-election") {
					if got, want := grants(t, rulesOf(t, r)), grants(t, leader.Rules); !reflect.DeepEqual(got, want) {
						t.Errorf("leader-election Role grants %v, config/rbac grants %v", keys(got), keys(want))
					}
					continue
				}
				holders = append(holders, r.GetNamespace())
				got := grants(t, rulesOf(t, r))
				for g := range want {
					if !got[g] {
						t.Errorf("%s %s/%s lacks %v", tc.kind, r.GetNamespace(), r.GetName(), g)
					}
				}
				for g := range got {
					if !want[g] {
						t.Errorf("%s %s/%s grants %v, which config/rbac does not (exec %t)", tc.kind, r.GetNamespace(), r.GetName(), g, tc.exec)
					}
				}
			}
			slices.Sort(holders)
			if !slices.Equal(holders, tc.holders) {
				t.Errorf("manager %ss in namespaces %q, want %q", tc.kind, holders, tc.holders)
			}
			// The right and the flag that uses it come together.
			var d appsv1.Deployment
			into(t, only(t, objs, "Deployment"), &d)
			if got := slices.Contains(d.Spec.Template.Spec.Containers[0].Args, "--exec-toggles"); got != tc.exec {
				t.Errorf("manager args %q: --exec-toggles present %t, want %t", d.Spec.Template.Spec.Containers[0].Args, got, tc.exec)
			}
		})
	}
}

func keys(m map[rule]bool) []rule {
	var out []rule
	for k := range m {
		out = append(out, k)
	}
	slices.SortFunc(out, func(a, b rule) int { return strings.Compare(a.group+a.resource+a.verb, b.group+b.resource+b.verb) })
	return out
}

// The chart with its defaults and `kubectl apply -k config/default` run the same
// manager: image, arguments, ports, probes, security contexts, resources.
func TestChartDeploymentMatchesConfigManager(t *testing.T) {
	var chartD, kustD appsv1.Deployment
	into(t, only(t, render(t), "Deployment"), &chartD)
	into(t, only(t, kustomize(t, "config/default"), "Deployment"), &kustD)
	cp, kp := chartD.Spec.Template.Spec, kustD.Spec.Template.Spec
	cc, kc := cp.Containers[0], kustD.Spec.Template.Spec.Containers[0]
	for _, f := range []struct {
		what      string
		chart, kz any
	}{
		{"replicas", chartD.Spec.Replicas, kustD.Spec.Replicas},
		{"pod securityContext", cp.SecurityContext, kp.SecurityContext},
		{"terminationGracePeriodSeconds", cp.TerminationGracePeriodSeconds, kp.TerminationGracePeriodSeconds},
		{"container count", len(cp.Containers), len(kp.Containers)},
		{"container name", cc.Name, kc.Name},
		{"image", cc.Image, kc.Image},
		{"imagePullPolicy", cc.ImagePullPolicy, kc.ImagePullPolicy},
		{"command", cc.Command, kc.Command},
		{"args", cc.Args, kc.Args},
		{"ports", cc.Ports, kc.Ports},
		{"livenessProbe", cc.LivenessProbe, kc.LivenessProbe},
		{"readinessProbe", cc.ReadinessProbe, kc.ReadinessProbe},
		{"container securityContext", cc.SecurityContext, kc.SecurityContext},
		{"resources", cc.Resources, kc.Resources},
	} {
		if !reflect.DeepEqual(f.chart, f.kz) {
			t.Errorf("%s differs:\n chart:          %+v\n config/default: %+v", f.what, deref(f.chart), deref(f.kz))
		}
	}
	// The hardening the issue asks for, stated once more so neither copy can
	// drop it in step with the other.
	sc, psc := cc.SecurityContext, cp.SecurityContext
	if psc == nil || sc == nil || psc.RunAsNonRoot == nil || !*psc.RunAsNonRoot || psc.RunAsUser == nil || *psc.RunAsUser != 65532 ||
		psc.SeccompProfile == nil || psc.SeccompProfile.Type != corev1.SeccompProfileTypeRuntimeDefault ||
		sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem || sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation ||
		sc.Capabilities == nil || !slices.Equal(sc.Capabilities.Drop, []corev1.Capability{"ALL"}) {
		t.Errorf("manager not hardened: pod %+v container %+v", psc, sc)
	}
	for _, p := range []struct {
		probe *corev1.Probe
		path  string
	}{{cc.LivenessProbe, "/healthz"}, {cc.ReadinessProbe, "/readyz"}} {
		if p.probe == nil || p.probe.HTTPGet == nil || p.probe.HTTPGet.Path != p.path || p.probe.HTTPGet.Port.String() != "health" {
			t.Errorf("probe %s: %+v", p.path, p.probe)
		}
	}
	for _, a := range []string{"--leader-elect", "--health-probe-bind-address=:8081", "--metrics-bind-address=:8080"} {
		if !slices.Contains(cc.Args, a) {
			t.Errorf("args %v lack %s", cc.Args, a)
		}
	}
}

func deref(v any) any {
	if r := reflect.ValueOf(v); r.Kind() == reflect.Pointer && !r.IsNil() {
		return r.Elem().Interface()
	}
	return v
}

// `kubectl apply -k` of config/default and config/samples would be accepted.
func TestKustomizeRendersPassServerSideDryRun(t *testing.T) {
	for _, dir := range []string{"config/default", "config/samples"} {
		t.Run(dir, func(t *testing.T) {
			objs := kustomize(t, dir)
			dryRun(t, objs)
			t.Logf("%d objects dry-run", len(objs))
		})
	}
	t.Run("config/samples lists every example", func(t *testing.T) {
		examples, err := filepath.Glob(filepath.Join(testenv.RepoRoot(), "examples", "*.yaml"))
		if err != nil {
			t.Fatal(err)
		}
		if got := len(find(kustomize(t, "config/samples"), "PerfExperiment")); got != len(examples) {
			t.Errorf("config/samples renders %d experiments, examples/ has %d: run hack/generate.sh", got, len(examples))
		}
	})
	t.Run("config/default namespaces everything", func(t *testing.T) {
		for _, o := range kustomize(t, "config/default") {
			switch o.GetKind() {
			case "Namespace", "CustomResourceDefinition", "ClusterRole", "ClusterRoleBinding":
				continue
			}
			if o.GetNamespace() != namespace {
				t.Errorf("%s %s is in namespace %q, want %s", o.GetKind(), o.GetName(), o.GetNamespace(), namespace)
			}
		}
	})
}
