package chart

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"perfexp.dev/perf-operator/internal/testenv"
)

// appVersion is the chart's appVersion, which image.tag defaults to.
func appVersion(t *testing.T) string {
	t.Helper()
	var c struct {
		AppVersion string `json:"appVersion"`
	}
	b, err := os.ReadFile(filepath.Join(chart, "Chart.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.Unmarshal(b, &c); err != nil || c.AppVersion == "" {
		t.Fatalf("Chart.yaml has no appVersion (%v)", err)
	}
	return c.AppVersion
}

// names lists the objects' names, sorted.
func names(objs []*unstructured.Unstructured) []string {
	var out []string
	for _, o := range objs {
		out = append(out, o.GetName())
	}
	slices.Sort(out)
	return out
}

func deployment(t *testing.T, objs []*unstructured.Unstructured) appsv1.Deployment {
	t.Helper()
	var d appsv1.Deployment
	into(t, only(t, objs, "Deployment"), &d)
	return d
}

// Each value of testdata/conventions.yaml visibly shapes what is rendered.
func TestChartConventions(t *testing.T) {
	objs := render(t, "-f", "test/chart/testdata/conventions.yaml")
	t.Run("fullnameOverride names every object, commonLabels label it", func(t *testing.T) {
		for _, o := range objs {
			if o.GetKind() == "CustomResourceDefinition" {
				continue // crds/ are installed as they are, never templated
			}
			if !strings.HasPrefix(o.GetName(), "platform-perf") {
				t.Errorf("%s %s is not named after fullnameOverride platform-perf", o.GetKind(), o.GetName())
			}
			l := o.GetLabels()
			if l["example.com/owner"] != "platform" || l["example.com/cost-centre"] != "42" {
				t.Errorf("%s %s lacks commonLabels: %v", o.GetKind(), o.GetName(), l)
			}
			if l["app.kubernetes.io/name"] != "perfop" || l["app.kubernetes.io/instance"] != release {
				t.Errorf("%s %s: app.kubernetes.io/name is not nameOverride perfop: %v", o.GetKind(), o.GetName(), l)
			}
		}
	})
	d := deployment(t, objs)
	p := d.Spec.Template.Spec
	c := p.Containers[0]
	t.Run("image by digest", func(t *testing.T) {
		want := "registry.example.com/platform/perf-operator@sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
		if c.Image != want {
			t.Errorf("image %s, want %s (the digest wins over the tag)", c.Image, want)
		}
		if !reflect.DeepEqual(p.ImagePullSecrets, []corev1.LocalObjectReference{{Name: "registry-credentials"}}) {
			t.Errorf("imagePullSecrets %v", p.ImagePullSecrets)
		}
	})
	t.Run("pod metadata", func(t *testing.T) {
		m := d.Spec.Template.ObjectMeta
		if m.Labels["team"] != "perf" || m.Annotations["example.com/scrape"] != "false" || m.Annotations["kubectl.kubernetes.io/default-container"] != "manager" {
			t.Errorf("pod labels %v annotations %v", m.Labels, m.Annotations)
		}
		for k, v := range d.Spec.Selector.MatchLabels {
			if m.Labels[k] != v {
				t.Errorf("selector %s=%s does not match the pod labels %v", k, v, m.Labels)
			}
		}
		if p.PriorityClassName != "platform-critical" {
			t.Errorf("priorityClassName %q", p.PriorityClassName)
		}
	})
	t.Run("security contexts replace the defaults", func(t *testing.T) {
		psc, sc := p.SecurityContext, c.SecurityContext
		if psc == nil || psc.RunAsUser == nil || *psc.RunAsUser != 10001 || psc.FSGroup == nil || *psc.FSGroup != 10001 {
			t.Errorf("pod securityContext %+v", psc)
		}
		if sc == nil || sc.RunAsNonRoot == nil || !*sc.RunAsNonRoot || sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem {
			t.Errorf("container securityContext %+v", sc)
		}
	})
	t.Run("extra env, volumes and mounts", func(t *testing.T) {
		if len(c.Env) != 2 || c.Env[0].Name != "HTTPS_PROXY" || c.Env[1].ValueFrom == nil || c.Env[1].ValueFrom.ResourceFieldRef == nil {
			t.Errorf("env %+v", c.Env)
		}
		if len(p.Volumes) != 1 || p.Volumes[0].ConfigMap == nil || p.Volumes[0].ConfigMap.Name != "corporate-ca" {
			t.Errorf("volumes %+v", p.Volumes)
		}
		if len(c.VolumeMounts) != 1 || c.VolumeMounts[0].MountPath != "/etc/ssl/certs/corporate" || !c.VolumeMounts[0].ReadOnly {
			t.Errorf("volume mounts %+v", c.VolumeMounts)
		}
	})
	t.Run("bindings and selectors follow the names", func(t *testing.T) {
		var crb rbacv1.ClusterRoleBinding
		for _, o := range find(objs, "ClusterRoleBinding") {
			if strings.HasSuffix(o.GetName(), "-manager") {
				into(t, o, &crb)
			}
		}
		if crb.RoleRef.Name != "platform-perf-manager" || crb.Subjects[0].Name != "platform-perf" || p.ServiceAccountName != "platform-perf" {
			t.Errorf("binding %+v, pod service account %s", crb, p.ServiceAccountName)
		}
		svc := only(t, objs, "Service")
		sel, _, _ := unstructured.NestedStringMap(svc.Object, "spec", "selector")
		for k, v := range sel {
			if d.Spec.Template.Labels[k] != v {
				t.Errorf("the metrics Service selects %s=%s, the pods have %v", k, v, d.Spec.Template.Labels)
			}
		}
	})
}

// Without overrides the names and labels are what they were before the
// overrides existed; each override changes only what it says.
func TestNamesAndImage(t *testing.T) {
	for _, tc := range []struct {
		name       string
		set        []string
		deployment string // the Deployment's name
		appName    string // app.kubernetes.io/name
		image      string // "" for perfexp.dev/perf-operator:<appVersion>
	}{
		{"defaults", nil, "perf-operator", "perf-operator", ""},
		{"nameOverride", []string{"--set", "nameOverride=perfx"}, "perf-operator-perfx", "perfx", ""},
		{"fullnameOverride", []string{"--set", "fullnameOverride=perf"}, "perf", "perf-operator", ""},
		{"tag", []string{"--set", "image.tag=v9.9.9"}, "perf-operator", "perf-operator", "perfexp.dev/perf-operator:v9.9.9"},
		{"digest", []string{"--set", "image.digest=sha256:" + strings.Repeat("ab", 32)}, "perf-operator", "perf-operator", "perfexp.dev/perf-operator@sha256:" + strings.Repeat("ab", 32)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			objs := render(t, tc.set...)
			d := deployment(t, objs)
			if d.Name != tc.deployment || d.Labels["app.kubernetes.io/name"] != tc.appName || d.Spec.Selector.MatchLabels["app.kubernetes.io/name"] != tc.appName {
				t.Errorf("Deployment %s labels %v selector %v; want name %s, app %s", d.Name, d.Labels, d.Spec.Selector.MatchLabels, tc.deployment, tc.appName)
			}
			want := tc.image
			if want == "" {
				want = "perfexp.dev/perf-operator:" + appVersion(t)
			}
			if got := d.Spec.Template.Spec.Containers[0].Image; got != want {
				t.Errorf("image %s, want %s", got, want)
			}
		})
	}
}

// Tenants get experiment rights through Kubernetes' built-in roles: the chart's
// aggregate ClusterRoles carry the standard labels and the rules of
// config/rbac, which `kubectl apply -k config/default` installs alike.
func TestAggregateRoles(t *testing.T) {
	want := map[string]struct {
		file   string
		labels []string
		verbs  []string // on perfexperiments
	}{
		"view": {"aggregate_view_role.yaml", []string{"view"}, []string{"get", "list", "watch"}},
		"edit": {"aggregate_edit_role.yaml", []string{"edit", "admin"}, []string{"get", "list", "watch", "create", "update", "patch", "delete"}},
	}
	check := func(t *testing.T, source string, roles map[string]*unstructured.Unstructured) {
		for kind, w := range want {
			r := roles[kind]
			if r == nil {
				t.Errorf("%s renders no %s role", source, kind)
				continue
			}
			for _, l := range []string{"view", "edit", "admin"} {
				key := "rbac.authorization.k8s.io/aggregate-to-" + l
				if got, want := r.GetLabels()[key] == "true", slices.Contains(w.labels, l); got != want {
					t.Errorf("%s: %s role %s has %s=true: %t, want %t", source, kind, r.GetName(), key, got, want)
				}
			}
			got := grants(t, rulesOf(t, r))
			for _, v := range w.verbs {
				if !got[rule{"perfexp.dev", "perfexperiments", v}] {
					t.Errorf("%s: %s role lacks %s on perfexperiments", source, kind, v)
				}
			}
			for g := range got {
				if g.group != "perfexp.dev" || (g.resource == "perfexperiments/status" && !slices.Contains([]string{"get", "list", "watch"}, g.verb)) {
					t.Errorf("%s: %s role grants %v; tenants get experiments only, and never write status", source, kind, g)
				}
			}
			var cfg rbacv1.ClusterRole
			readYAML(t, filepath.Join(testenv.RepoRoot(), "config", "rbac", w.file), &cfg)
			if !reflect.DeepEqual(got, grants(t, cfg.Rules)) {
				t.Errorf("%s: %s role grants %v, config/rbac/%s %v", source, kind, keys(got), w.file, keys(grants(t, cfg.Rules)))
			}
		}
	}
	byKind := func(objs []*unstructured.Unstructured, prefix string) map[string]*unstructured.Unstructured {
		out := map[string]*unstructured.Unstructured{}
		for _, r := range find(objs, "ClusterRole") {
			for kind := range want {
				if r.GetName() == prefix+"-"+kind {
					out[kind] = r
				}
			}
		}
		return out
	}
	t.Run("chart", func(t *testing.T) {
		check(t, "chart", byKind(render(t), "perf-operator"))
	})
	t.Run("config/default", func(t *testing.T) {
		check(t, "config/default", byKind(kustomize(t, "config/default"), "perf-operator"))
	})
	for _, tc := range []struct{ name, values string }{
		{"off", "--set=rbac.aggregateRoles=false"},
		{"namespaced", "-f=test/chart/testdata/namespaced.yaml"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := byKind(render(t, tc.values), "perf-operator"); len(got) != 0 {
				t.Errorf("%s rendered aggregate roles %v", tc.values, got)
			}
		})
	}
}

// The aggregate roles' rules are enough for what a tenant does: a user bound
// in one namespace to the edit role creates an experiment and aborts it
// (spec.abort is a patch), but cannot write its status; a view user reads it
// and can change nothing. (envtest runs no controller-manager, so the
// aggregation into the built-in roles is not exercised here: the roles are
// bound directly; their labels are checked by TestAggregateRoles.)
func TestAggregateRolesLetTenantsRunAndAbort(t *testing.T) {
	ctx := context.Background()
	const ns = "tenant-a"
	if err := k8s.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	for _, r := range find(render(t), "ClusterRole") {
		if r.GetName() != "perf-operator-view" && r.GetName() != "perf-operator-edit" {
			continue
		}
		r = r.DeepCopy()
		if err := k8s.Create(ctx, r); err != nil && !apierrors.IsAlreadyExists(err) {
			t.Fatal(err)
		}
		user := strings.TrimPrefix(r.GetName(), "perf-operator-") + "-user"
		rb := &rbacv1.RoleBinding{
			ObjectMeta: metav1.ObjectMeta{Name: user, Namespace: ns},
			RoleRef:    rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: r.GetName()},
			Subjects:   []rbacv1.Subject{{APIGroup: "rbac.authorization.k8s.io", Kind: "User", Name: user}},
		}
		if err := k8s.Create(ctx, rb); err != nil && !apierrors.IsAlreadyExists(err) {
			t.Fatal(err)
		}
	}
	as := func(user string) client.Client {
		cfg := rest.CopyConfig(env.Config)
		cfg.Impersonate = rest.ImpersonationConfig{UserName: user}
		c, err := client.New(cfg, client.Options{Scheme: k8s.Scheme()})
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	exp := example(t, ns, "tenant-run")

	// Authorisation is checked before the rest, so the errors are Forbidden
	// exactly where the role grants nothing.
	editor, viewer := as("edit-user"), as("view-user")
	if err := viewer.Create(ctx, exp.DeepCopy()); !apierrors.IsForbidden(err) {
		t.Errorf("a view user created an experiment: %v", err)
	}
	if err := editor.Create(ctx, exp); err != nil {
		t.Fatalf("an edit user cannot create an experiment: %v", err)
	}
	abort := client.RawPatch(types.MergePatchType, []byte(`{"spec":{"abort":true}}`))
	if err := viewer.Patch(ctx, exp.DeepCopy(), abort); !apierrors.IsForbidden(err) {
		t.Errorf("a view user aborted an experiment: %v", err)
	}
	if err := editor.Patch(ctx, exp.DeepCopy(), abort); err != nil {
		t.Errorf("an edit user cannot abort an experiment: %v", err)
	}
	status := client.RawPatch(types.MergePatchType, []byte(`{"status":{"phase":"Succeeded"}}`))
	if err := editor.Status().Patch(ctx, exp.DeepCopy(), status); !apierrors.IsForbidden(err) {
		t.Errorf("an edit user wrote an experiment's status: %v", err)
	}
	list := &unstructured.UnstructuredList{}
	list.SetGroupVersionKind(exp.GroupVersionKind())
	if err := viewer.List(ctx, list, client.InNamespace(ns)); err != nil || len(list.Items) != 1 {
		t.Errorf("a view user lists %d experiments: %v", len(list.Items), err)
	}
	if err := viewer.List(ctx, list, client.InNamespace("default")); !apierrors.IsForbidden(err) {
		t.Errorf("a view user of %s listed experiments in another namespace: %v", ns, err)
	}
	if err := editor.Delete(ctx, exp.DeepCopy()); err != nil {
		t.Errorf("an edit user cannot delete an experiment: %v", err)
	}
}

// The issue as users hit it: a tenant bound to Kubernetes' built-in `edit`
// role could not create or abort an experiment. With the chart's roles
// applied and the real clusterrole-aggregation controller running (from
// kube-controller-manager, which envtest does not start), `edit` gains the
// experiment rules and `view` the read ones.
func TestBuiltInRolesGainExperimentRights(t *testing.T) {
	ctx := context.Background()
	kcm, err := tool("kube-controller-manager", "hack/tools.sh kube")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	kubeconfig, err := env.AdminKubeconfig(dir, "aggregation")
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range find(render(t), "ClusterRole") {
		if strings.HasSuffix(r.GetName(), "-view") || strings.HasSuffix(r.GetName(), "-edit") {
			if err := k8s.Create(ctx, r.DeepCopy()); err != nil && !apierrors.IsAlreadyExists(err) {
				t.Fatal(err)
			}
		}
	}
	cctx, cancel := context.WithCancel(ctx)
	cmd := exec.CommandContext(cctx, kcm, "--kubeconfig="+kubeconfig, "--controllers=clusterrole-aggregation-controller",
		"--leader-elect=false", "--secure-port=0", "--use-service-account-credentials=false")
	var logs bytes.Buffer
	cmd.Stdout, cmd.Stderr = &logs, &logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		cancel()
		_ = cmd.Wait()
	}()

	want := map[string][]string{ // built-in role → verbs it must gain on perfexperiments
		"view":  {"get", "list", "watch"},
		"edit":  {"get", "list", "watch", "create", "update", "patch", "delete"},
		"admin": {"get", "list", "watch", "create", "update", "patch", "delete"},
	}
	const patience = 60 * time.Second
	deadline := time.Now().Add(patience)
	for role, verbs := range want {
		for {
			var cr rbacv1.ClusterRole
			if err := k8s.Get(ctx, client.ObjectKey{Name: role}, &cr); err != nil {
				t.Fatal(err)
			}
			got := grants(t, slices.DeleteFunc(cr.Rules, func(r rbacv1.PolicyRule) bool {
				return len(r.ResourceNames) > 0 || len(r.NonResourceURLs) > 0
			}))
			missing := slices.DeleteFunc(slices.Clone(verbs), func(v string) bool { return got[rule{"perfexp.dev", "perfexperiments", v}] })
			if len(missing) == 0 {
				if role == "view" && got[rule{"perfexp.dev", "perfexperiments", "create"}] {
					t.Errorf("the built-in view role may create experiments")
				}
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("the built-in %s role lacks %v on perfexperiments after %s of aggregation; controller-manager said:\n%s", role, missing, patience, lastLines(logs.String(), 5))
			}
			time.Sleep(200 * time.Millisecond)
		}
	}

	// So a user with only the built-in edit role in a namespace runs and
	// aborts an experiment there.
	const ns = "tenant-b"
	if err := k8s.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	rb := &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "alice-edit", Namespace: ns},
		RoleRef:    rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: "edit"},
		Subjects:   []rbacv1.Subject{{APIGroup: "rbac.authorization.k8s.io", Kind: "User", Name: "alice"}},
	}
	if err := k8s.Create(ctx, rb); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	cfg := rest.CopyConfig(env.Config)
	cfg.Impersonate = rest.ImpersonationConfig{UserName: "alice"}
	alice, err := client.New(cfg, client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	exp := example(t, ns, "alice-run")
	if err := alice.Create(ctx, exp); err != nil {
		t.Fatalf("a user with the built-in edit role cannot create an experiment: %v", err)
	}
	if err := alice.Patch(ctx, exp, client.RawPatch(types.MergePatchType, []byte(`{"spec":{"abort":true}}`))); err != nil {
		t.Fatalf("a user with the built-in edit role cannot abort an experiment: %v", err)
	}
}

// example is examples/profiling-overhead.yaml as ns/name.
func example(t *testing.T, ns, name string) *unstructured.Unstructured {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(testenv.RepoRoot(), "examples", "profiling-overhead.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	exp := &unstructured.Unstructured{}
	if err := yaml.Unmarshal(b, &exp.Object); err != nil {
		t.Fatal(err)
	}
	exp.SetNamespace(ns)
	exp.SetName(name)
	return exp
}

// As the chart README says: a key set is merged into the hardened defaults,
// and null drops one.
func TestSecurityContextsMergeIntoTheDefaults(t *testing.T) {
	d := deployment(t, render(t, "--set", "podSecurityContext.fsGroup=65532", "--set", "securityContext.readOnlyRootFilesystem=null"))
	psc, sc := d.Spec.Template.Spec.SecurityContext, d.Spec.Template.Spec.Containers[0].SecurityContext
	if psc == nil || psc.FSGroup == nil || *psc.FSGroup != 65532 || psc.RunAsNonRoot == nil || !*psc.RunAsNonRoot || psc.SeccompProfile == nil {
		t.Errorf("pod securityContext %+v: fsGroup not added to the defaults", psc)
	}
	if sc == nil || sc.ReadOnlyRootFilesystem != nil || sc.AllowPrivilegeEscalation == nil || sc.Capabilities == nil {
		t.Errorf("container securityContext %+v: readOnlyRootFilesystem not dropped, or more", sc)
	}
}

// The allow-lists reach the manager's flags, and the requester policy is
// rendered with its binding.
func TestAllowListsAndRequesterPolicy(t *testing.T) {
	objs := render(t, "--set", "allowedPrometheusURLs={http://prometheus-operated.monitoring:9090,https://prom.example:443}",
		"--set", "allowedK6Images={grafana/k6:*}")
	args := deployment(t, objs).Spec.Template.Spec.Containers[0].Args
	for _, want := range []string{"--allowed-prometheus-urls=http://prometheus-operated.monitoring:9090,https://prom.example:443", "--allowed-k6-images=grafana/k6:*"} {
		if !slices.Contains(args, want) {
			t.Errorf("args %q lack %q", args, want)
		}
	}
	for _, a := range deployment(t, render(t)).Spec.Template.Spec.Containers[0].Args {
		if strings.HasPrefix(a, "--allowed-") {
			t.Errorf("default render restricts: %s", a)
		}
	}
	only(t, objs, "MutatingAdmissionPolicy")
	only(t, objs, "MutatingAdmissionPolicyBinding")
	if out, err := helmTemplate("--set", "allowedPrometheusURLs={not-a-url}"); err == nil {
		t.Errorf("a malformed Prometheus URL was accepted:\n%s", out)
	}
}
