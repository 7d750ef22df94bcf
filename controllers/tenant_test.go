package controllers_test

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	perfv1 "perfexp.dev/perf-operator/api/v1alpha1"
	"perfexp.dev/perf-operator/internal/testenv"
	"perfexp.dev/perf-operator/internal/toggle"
)

// installRequesterPolicy applies config/admission's MutatingAdmissionPolicy
// and binding, as the chart does, and waits until it stamps experiments.
func installRequesterPolicy(t *testing.T, ns string) {
	t.Helper()
	var b []byte
	for _, f := range []string{"requester-policy.yaml", "requester-binding.yaml"} {
		doc, err := os.ReadFile(filepath.Join(testenv.RepoRoot(), "config", "admission", f))
		if err != nil {
			t.Fatal(err)
		}
		b = append(append(b, doc...), "\n---\n"...)
	}
	dec := yaml.NewYAMLOrJSONDecoder(bytes.NewReader(b), 4096)
	var objs []*unstructured.Unstructured
	for {
		u := &unstructured.Unstructured{}
		if err := dec.Decode(&u.Object); err != nil {
			break
		}
		if len(u.Object) == 0 {
			continue
		}
		if err := k8s.Create(context.Background(), u); err != nil && !strings.Contains(err.Error(), "already exists") {
			t.Fatal(err)
		}
		objs = append(objs, u)
	}
	t.Cleanup(func() {
		for _, u := range objs {
			_ = k8s.Delete(context.Background(), u)
		}
	})
	// Policies load asynchronously, and the admission plugin resolves a custom
	// resource only once its periodically refreshed discovery has seen the CRD
	// (until then it answers 503): probe with a dry-run create until stamped.
	var last error
	for deadline := time.Now().Add(2 * time.Minute); time.Now().Before(deadline); time.Sleep(200 * time.Millisecond) {
		probe := shortExperiment(ns, "app", envToggle())
		probe.Name = "probe"
		if last = k8s.Create(context.Background(), probe, client.DryRunAll); last == nil && probe.Annotations[perfv1.AnnotationRequestedBy] != "" {
			return
		}
	}
	t.Fatalf("the requester policy never stamped an experiment: %v", last)
}

// tenantClient is a user of the test apiserver with the given rules in ns.
func tenantClient(t *testing.T, ns, name string, rules []rbacv1.PolicyRule) client.Client {
	t.Helper()
	ctx := context.Background()
	role := &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns}, Rules: rules}
	if err := k8s.Create(ctx, role); err != nil {
		t.Fatal(err)
	}
	rb := &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: name},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: name}},
	}
	if err := k8s.Create(ctx, rb); err != nil {
		t.Fatal(err)
	}
	// The admin impersonates the tenant: the API server authorises and
	// records the request as the tenant's, as for a real user.
	cfg := rest.CopyConfig(env.Config)
	cfg.Impersonate = rest.ImpersonationConfig{UserName: name, Groups: []string{"tenants", "system:authenticated"}}
	c, err := client.New(cfg, client.Options{Scheme: scheme})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

var experimentRights = rbacv1.PolicyRule{APIGroups: []string{"perfexp.dev"}, Resources: []string{"perfexperiments"}, Verbs: []string{"*"}}

// A tenant allowed only to create PerfExperiments gets nothing through the
// operator that its own RBAC forbids: the experiment stalls with Forbidden,
// naming the missing right and the kubectl line that shows it, and the target
// is untouched (template bytes, no lock, no Job, no exec). With the rights, the
// same experiment runs.
func TestATenantGetsNothingItsRBACForbids(t *testing.T) {
	jobs := rbacv1.PolicyRule{APIGroups: []string{"batch"}, Resources: []string{"jobs"}, Verbs: []string{"create"}}
	patch := rbacv1.PolicyRule{APIGroups: []string{"apps"}, Resources: []string{"deployments"}, Verbs: []string{"patch"}}
	for _, tc := range []struct {
		name    string
		toggle  perfv1.ToggleSpec
		rules   []rbacv1.PolicyRule
		missing string // "" when the run may start
		canI    string
	}{
		{"only experiment rights, env toggle", envToggle(), nil, `create jobs.batch`, "kubectl auth can-i create jobs.batch -n NS --as USER"},
		{"Jobs but not the target, env toggle", envToggle(), []rbacv1.PolicyRule{jobs}, `patch deployments.apps "app"`, "kubectl auth can-i patch deployments.apps/app -n NS --as USER"},
		{"Jobs but not pods/exec, exec toggle", execToggleSpec(), []rbacv1.PolicyRule{jobs}, `create pods/exec`, "kubectl auth can-i create pods --subresource=exec -n NS --as USER"},
		{"every right, env toggle", envToggle(), []rbacv1.PolicyRule{jobs, patch}, "", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pe := &podExec{}
			d := newDriverWith(t, newTestClock(), runtimeToggles{exec: toggle.Execer{Executor: pe}, review: true})
			installRequesterPolicy(t, d.c.ns)
			dep := d.c.target("app")
			targetPods(t, d.c.ns, dep)
			before := templateJSON(t, d.c.ns, "app")
			user := "tenant-" + strings.ToLower(strings.ReplaceAll(tc.name[:8], " ", "-"))
			tenant := tenantClient(t, d.c.ns, user, append([]rbacv1.PolicyRule{experimentRights}, tc.rules...))

			e := shortExperiment(d.c.ns, "app", tc.toggle)
			// A forged stamp is replaced by the API server's record.
			e.Annotations = map[string]string{perfv1.AnnotationRequestedBy: "admin", perfv1.AnnotationRequestedByGroups: "system:masters"}
			if err := tenant.Create(context.Background(), e); err != nil {
				t.Fatal(err)
			}
			if got := e.Annotations[perfv1.AnnotationRequestedBy]; got != user {
				t.Fatalf("requested-by %q; want the API server's %q", got, user)
			}
			if g := e.Annotations[perfv1.AnnotationRequestedByGroups]; strings.Contains(g, "system:masters") {
				t.Fatalf("forged groups kept: %q", g)
			}
			// Nor can a metadata-only update forge it afterwards.
			forged := e.DeepCopy()
			forged.Annotations[perfv1.AnnotationRequestedBy] = "admin"
			if err := tenant.Update(context.Background(), forged); err == nil && forged.Annotations[perfv1.AnnotationRequestedBy] != user {
				t.Fatalf("a metadata update forged the stamp: %q", forged.Annotations[perfv1.AnnotationRequestedBy])
			}

			if tc.missing == "" {
				exp := d.until("baseline", phaseIs(perfv1.PhaseBaseline))
				if exp.Status.Phase != perfv1.PhaseBaseline {
					t.Fatalf("phase %s", exp.Status.Phase)
				}
				return
			}
			exp := d.until("Forbidden", func(e *perfv1.PerfExperiment) bool {
				c := meta.FindStatusCondition(e.Status.Conditions, perfv1.ConditionStalled)
				return c != nil && c.Status == metav1.ConditionTrue
			})
			c := meta.FindStatusCondition(exp.Status.Conditions, perfv1.ConditionStalled)
			canI := strings.NewReplacer("NS", d.c.ns, "USER", user).Replace(tc.canI)
			if c.Reason != perfv1.ReasonForbidden || !strings.Contains(c.Message, tc.missing) || !strings.Contains(c.Message, canI) || !strings.Contains(c.Message, user) {
				t.Fatalf("Stalled %s: %q; want Forbidden naming %q and %q", c.Reason, c.Message, tc.missing, canI)
			}
			// A few more rounds: nothing is done while it waits.
			for i := 0; i < 8; i++ {
				d.c.tick()
				d.clock.Step(step)
				d.c.poke(d.name)
				time.Sleep(50 * time.Millisecond)
			}
			if after := templateJSON(t, d.c.ns, "app"); after != before {
				t.Errorf("template changed:\nbefore %s\nafter  %s", before, after)
			}
			var js batchv1.JobList
			if err := k8s.List(context.Background(), &js, client.InNamespace(d.c.ns)); err != nil {
				t.Fatal(err)
			}
			if len(js.Items) != 0 {
				t.Errorf("%d Jobs created for a forbidden experiment", len(js.Items))
			}
			if got := templateJSON(t, d.c.ns, "app"); got != before || d.c.experiment(d.name).Status.Phase != perfv1.PhasePending {
				t.Errorf("the experiment moved on")
			}
			for _, p := range fakePods {
				if calls := pe.of(p.name); len(calls) > 0 {
					t.Errorf("pod %s got exec calls %v", p.name, calls)
				}
			}
			assertUnlocked(t, d.c.ns)
		})
	}
}

func assertUnlocked(t *testing.T, ns string) {
	t.Helper()
	dep := &appsv1.Deployment{}
	if err := k8s.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: "app"}, dep); err != nil {
		t.Fatal(err)
	}
	if _, ok := dep.Annotations[perfv1.AnnotationLock]; ok {
		t.Errorf("target locked for a forbidden experiment: %v", dep.Annotations)
	}
}
