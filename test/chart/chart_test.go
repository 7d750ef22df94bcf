package chart

import (
	"path/filepath"
	"slices"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

func TestLintStrict(t *testing.T) {
	t.Run("chart defaults", func(t *testing.T) {
		if out, err := runTool(helm, "lint", "--strict", chart, "--namespace", namespace); err != nil {
			t.Fatalf("helm lint --strict: %v\n%s", err, out)
		}
	})
	for _, f := range valuesFiles(t) {
		t.Run(filepath.Base(f), func(t *testing.T) {
			if out, err := runTool(helm, "lint", "--strict", chart, "--namespace", namespace, "-f", filepath.Join("test", "chart", f)); err != nil {
				t.Fatalf("helm lint --strict -f %s: %v\n%s", f, err, out)
			}
		})
	}
}

// Every object the chart renders, for every values file, is accepted by the
// apiserver with strict field validation: right kinds, versions, fields and types.
func TestRenderedObjectsPassServerSideDryRun(t *testing.T) {
	for _, f := range valuesFiles(t) {
		t.Run(filepath.Base(f), func(t *testing.T) {
			objs := render(t, "-f", filepath.Join("test", "chart", f))
			dryRun(t, objs)
			var kinds []string
			for _, o := range objs {
				kinds = append(kinds, o.GetKind())
			}
			t.Logf("%d objects dry-run: %v", len(objs), kinds)
		})
	}
}

// What each values file is for shows in the rendered objects.
func TestValuesShapeTheRender(t *testing.T) {
	t.Run("defaults", func(t *testing.T) {
		objs := render(t)
		for _, kind := range []string{"ServiceMonitor", "PrometheusRule", "ConfigMap", "Role", "RoleBinding"} {
			n := len(find(objs, kind))
			if kind == "Role" || kind == "RoleBinding" {
				n-- // the leader-election Role and binding
			}
			if n != 0 {
				t.Errorf("defaults render %d extra %s, want none", n, kind)
			}
		}
		// The manager's role, the tenants' view and edit roles, and the role to
		// read the HTTPS metrics endpoint.
		if got := names(find(objs, "ClusterRole")); !slices.Equal(got, []string{"perf-operator-edit", "perf-operator-manager", "perf-operator-metrics-reader", "perf-operator-view"}) {
			t.Errorf("ClusterRoles %v", got)
		}
		// The manager's binding, and system:auth-delegator for the metrics endpoint.
		if got := names(find(objs, "ClusterRoleBinding")); !slices.Equal(got, []string{"perf-operator-manager", "perf-operator-metrics-auth"}) {
			t.Errorf("ClusterRoleBindings %v", got)
		}
		only(t, objs, "ServiceAccount")
		only(t, objs, "Service")
		var d appsv1.Deployment
		into(t, only(t, objs, "Deployment"), &d)
		c := d.Spec.Template.Spec.Containers[0]
		// The tag defaults to the chart's appVersion.
		if want := "perfexp.dev/perf-operator:" + appVersion(t); c.Image != want || c.ImagePullPolicy != corev1.PullIfNotPresent {
			t.Errorf("image %s %s, want %s IfNotPresent", c.Image, c.ImagePullPolicy, want)
		}
		if slices.ContainsFunc(c.Args, func(a string) bool { return strings.HasPrefix(a, "--watch-namespaces") }) {
			t.Errorf("defaults watch all namespaces, args are %v", c.Args)
		}
	})
	t.Run("namespaced", func(t *testing.T) {
		objs := render(t, "-f", "test/chart/testdata/namespaced.yaml")
		// Only the metrics endpoint's caller checks are cluster-wide: the reviews
		// they need are cluster-scoped.
		if got := append(names(find(objs, "ClusterRole")), names(find(objs, "ClusterRoleBinding"))...); !slices.Equal(got, []string{"perf-operator-metrics-reader", "perf-operator-metrics-auth"}) {
			t.Errorf("namespaced mode rendered cluster-wide RBAC objects %v", got)
		}
		for _, kind := range []string{"Role", "RoleBinding"} {
			got := map[string]bool{}
			for _, o := range find(objs, kind) {
				got[o.GetNamespace()+"/"+o.GetName()] = true
			}
			for _, want := range []string{"team-a/perf-operator-manager", "team-b/perf-operator-manager", namespace + "/perf-operator-leader-election"} {
				if !got[want] {
					t.Errorf("no %s %s; rendered %v", kind, want, got)
				}
			}
		}
		var d appsv1.Deployment
		into(t, only(t, objs, "Deployment"), &d)
		if args := d.Spec.Template.Spec.Containers[0].Args; !slices.Contains(args, "--watch-namespaces=team-a,team-b") {
			t.Errorf("args %v lack --watch-namespaces=team-a,team-b", args)
		}
		for _, o := range find(objs, "RoleBinding") {
			var rb rbacv1.RoleBinding
			into(t, o, &rb)
			want := rbacv1.Subject{Kind: "ServiceAccount", Name: "perf-operator", Namespace: namespace}
			if len(rb.Subjects) != 1 || rb.Subjects[0] != want {
				t.Errorf("RoleBinding %s/%s binds %v, want %v", o.GetNamespace(), o.GetName(), rb.Subjects, want)
			}
		}
	})
	t.Run("custom", func(t *testing.T) {
		objs := render(t, "-f", "test/chart/testdata/custom.yaml")
		var d appsv1.Deployment
		into(t, only(t, objs, "Deployment"), &d)
		p := d.Spec.Template.Spec
		c := p.Containers[0]
		if c.Image != "registry.example.com/platform/perf-operator:v0.1.0" || c.ImagePullPolicy != corev1.PullAlways {
			t.Errorf("image %s %s", c.Image, c.ImagePullPolicy)
		}
		for _, a := range []string{"--leader-elect", "--watch-namespaces=shop", "--zap-log-level=debug", "--graceful-shutdown-timeout=20s"} {
			if !slices.Contains(c.Args, a) {
				t.Errorf("args %v lack %s", c.Args, a)
			}
		}
		if *d.Spec.Replicas != 2 || c.Resources.Limits.Memory().String() != "512Mi" || c.Resources.Requests.Cpu().String() != "200m" {
			t.Errorf("replicas %d, resources %v", *d.Spec.Replicas, c.Resources)
		}
		if p.NodeSelector["kubernetes.io/os"] != "linux" || len(p.Tolerations) != 1 || p.Affinity == nil || p.Affinity.NodeAffinity == nil {
			t.Errorf("scheduling not passed through: %v %v %v", p.NodeSelector, p.Tolerations, p.Affinity)
		}
		if len(p.ImagePullSecrets) != 1 || p.PriorityClassName != "system-cluster-critical" || d.Spec.Template.Labels["team"] != "perf" {
			t.Errorf("pull secrets %v, priority class %q, labels %v", p.ImagePullSecrets, p.PriorityClassName, d.Spec.Template.Labels)
		}
		// A cluster-scoped install may still watch only some namespaces.
		if n := len(find(objs, "ClusterRoleBinding")); n != 2 {
			t.Errorf("%d ClusterRoleBindings, want the manager's and the metrics endpoint's", n)
		}
	})
	t.Run("monitoring", func(t *testing.T) {
		objs := render(t, "-f", "test/chart/testdata/monitoring.yaml")
		for _, kind := range []string{"ServiceMonitor", "PrometheusRule"} {
			if o := only(t, objs, kind); o.GetLabels()["release"] != "monitoring" {
				t.Errorf("%s labels %v lack release=monitoring (the stack's selector)", kind, o.GetLabels())
			}
		}
		cm := only(t, objs, "ConfigMap")
		if cm.GetNamespace() != "grafana" || cm.GetLabels()["grafana_dashboard"] != "1" || cm.GetAnnotations()["grafana_folder"] != "Performance" {
			t.Errorf("dashboard ConfigMap %s/%s labels %v annotations %v", cm.GetNamespace(), cm.GetName(), cm.GetLabels(), cm.GetAnnotations())
		}
		sm := only(t, objs, "ServiceMonitor")
		svc := only(t, objs, "Service")
		sel, _, err := unstructured.NestedStringMap(sm.Object, "spec", "selector", "matchLabels")
		if err != nil || len(sel) == 0 {
			t.Fatalf("ServiceMonitor selector %v: %v", sel, err)
		}
		for k, v := range sel {
			if svc.GetLabels()[k] != v {
				t.Errorf("ServiceMonitor selects %s=%s; the metrics Service has labels %v", k, v, svc.GetLabels())
			}
		}
	})
}

// Values the schema or the templates refuse fail both `helm lint --strict` and
// `helm template`, with a message that names the offending key.
func TestInvalidValuesAreRefusedNamingTheKey(t *testing.T) {
	cases := []struct {
		name string
		set  []string
		want []string // all must appear in the output
	}{
		{"scope not in the enum", []string{"--set", "rbac.scope=bogus"}, []string{"/rbac/scope", "cluster", "namespaced"}},
		{"replicas a string", []string{"--set-string", "replicas=two"}, []string{"/replicas", "integer"}},
		{"replicas negative", []string{"--set", "replicas=-1"}, []string{"/replicas", "minimum"}},
		{"namespaced without namespaces", []string{"--set", "rbac.scope=namespaced"}, []string{"/watchNamespaces", "minItems"}},
		{"unknown top-level key", []string{"--set", "replica=2"}, []string{"replica", "additional properties"}},
		{"unknown nested key", []string{"--set", "monitoring.serviceMonitor.enable=true"}, []string{"/monitoring/serviceMonitor", "enable"}},
		{"pull policy misspelled", []string{"--set", "image.pullPolicy=IfNotPresnt"}, []string{"/image/pullPolicy", "IfNotPresent"}},
		{"namespace not a DNS label", []string{"--set", "watchNamespaces={Team_A}"}, []string{"/watchNamespaces/0"}},
		{"extra arg not a flag", []string{"--set", "extraArgs={debug}"}, []string{"/extraArgs/0"}},
		{"interval not a duration", []string{"--set", "monitoring.serviceMonitor.interval=soon"}, []string{"/monitoring/serviceMonitor/interval"}},
		{"enabled not a boolean", []string{"--set-string", "monitoring.dashboard.enabled=yes"}, []string{"/monitoring/dashboard/enabled", "boolean"}},
		{"memory limit in words", []string{"--set", "resources.limits.memory=lots"}, []string{"/resources/limits/memory"}},
		{"unknown image key", []string{"--set", "image.sha=abc"}, []string{"/image", "sha"}},
		{"digest without algorithm", []string{"--set", "image.digest=0123abcd"}, []string{"/image/digest"}},
		{"nameOverride not a DNS label", []string{"--set", "nameOverride=Perf_Op"}, []string{"/nameOverride"}},
		{"commonLabels value a number", []string{"--set", "commonLabels.tier=1"}, []string{"/commonLabels/tier", "string"}},
		{"extraEnv without a name", []string{"--set", "extraEnv[0].value=x"}, []string{"/extraEnv/0", "name"}},
		{"extraVolumeMounts without a mountPath", []string{"--set", "extraVolumeMounts[0].name=ca"}, []string{"/extraVolumeMounts/0", "mountPath"}},
		{"podSecurityContext a string", []string{"--set", "podSecurityContext=restricted"}, []string{"/podSecurityContext", "object"}},
		{"aggregateRoles not a boolean", []string{"--set-string", "rbac.aggregateRoles=yes"}, []string{"/rbac/aggregateRoles", "boolean"}},
		{"unknown key among the new ones", []string{"--set", "extraVolume[0].name=x"}, []string{"extraVolume", "additional properties"}},
	}
	// The templates refuse namespaced mode without namespaces themselves too,
	// for installs that skip the schema. (`helm lint` never fails on a
	// template's `fail`, by design, so only `helm template` can show it.)
	skipSchema := []string{"--skip-schema-validation", "--set", "rbac.scope=namespaced"}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			for _, cmd := range [][]string{
				append([]string{"lint", "--strict", chart, "--namespace", namespace}, tc.set...),
				append([]string{"template", release, chart, "--namespace", namespace}, tc.set...),
			} {
				out, err := runTool(helm, cmd...)
				if err == nil {
					t.Errorf("helm %s %v succeeded; want it refused:\n%s", cmd[0], tc.set, out)
					continue
				}
				for _, w := range tc.want {
					if !strings.Contains(out, w) {
						t.Errorf("helm %s %v: output does not say %q:\n%s", cmd[0], tc.set, w, out)
					}
				}
				t.Logf("helm %s %v: %s", cmd[0], tc.set, lastLines(out, 3))
			}
		})
	}
	t.Run("namespaced without namespaces, schema skipped", func(t *testing.T) {
		out, err := runTool(helm, append([]string{"template", release, chart, "--namespace", namespace}, skipSchema...)...)
		if err == nil {
			t.Fatalf("helm template %v succeeded; want the chart's fail message:\n%s", skipSchema, out)
		}
		if !strings.Contains(out, "rbac.scope=namespaced needs at least one namespace in watchNamespaces") {
			t.Errorf("helm template %v: no clear message:\n%s", skipSchema, out)
		}
		t.Logf("%s", lastLines(out, 3))
	})
}

func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, " | ")
}
