package toggle

import (
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"reflect"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/util/intstr"

	perfv1 "perfexp.dev/perf-operator/api/v1alpha1"
)

func ptr[T any](v T) *T { return &v }

func envVar(name, value string) corev1.EnvVar { return corev1.EnvVar{Name: name, Value: value} }

func fromConfigMap(name string) corev1.EnvVar {
	return corev1.EnvVar{Name: name, ValueFrom: &corev1.EnvVarSource{
		ConfigMapKeyRef: &corev1.ConfigMapKeySelector{
			LocalObjectReference: corev1.LocalObjectReference{Name: "settings"}, Key: "k", Optional: ptr(true),
		},
	}}
}

func podTemplate(cs ...corev1.Container) corev1.PodTemplateSpec {
	t := corev1.PodTemplateSpec{}
	t.Labels = map[string]string{"app": "shop"}
	t.Spec.Containers = cs
	return t
}

func app(env []corev1.EnvVar) corev1.Container {
	return corev1.Container{Name: "app", Image: "shop:1", Env: env}
}

// shape is a pod template to toggle; it is built for the variable name the toggle
// uses, so one list of shapes serves env and jvmOption toggles alike.
type shape struct {
	name      string
	container string
	build     func(v string) corev1.PodTemplateSpec
}

// orig is the original value of the toggled variable in the shapes: a valid
// JAVA_TOOL_OPTIONS and an ordinary env value at once.
const orig = "-Xmx512m -Dshop.mode=fast"

func shapes() []shape {
	single := func(env ...corev1.EnvVar) func(string) corev1.PodTemplateSpec {
		return func(string) corev1.PodTemplateSpec { return podTemplate(app(env)) }
	}
	with := func(f func(v string) []corev1.EnvVar) func(string) corev1.PodTemplateSpec {
		return func(v string) corev1.PodTemplateSpec { return podTemplate(app(f(v))) }
	}
	return []shape{
		{name: "no env", build: single()},
		{name: "empty env slice", build: func(string) corev1.PodTemplateSpec { return podTemplate(app([]corev1.EnvVar{})) }},
		{name: "other vars only", build: single(envVar("A", "1"), envVar("B", "2"))},
		{name: "var only", build: with(func(v string) []corev1.EnvVar { return []corev1.EnvVar{envVar(v, orig)} })},
		{name: "var first", build: with(func(v string) []corev1.EnvVar {
			return []corev1.EnvVar{envVar(v, orig), envVar("A", "1"), envVar("B", "2")}
		})},
		{name: "var middle", build: with(func(v string) []corev1.EnvVar {
			return []corev1.EnvVar{envVar("A", "1"), envVar(v, orig), envVar("B", "2")}
		})},
		{name: "var last", build: with(func(v string) []corev1.EnvVar {
			return []corev1.EnvVar{envVar("A", "1"), envVar("B", "2"), envVar(v, orig)}
		})},
		{name: "var empty value", build: with(func(v string) []corev1.EnvVar { return []corev1.EnvVar{envVar("A", "1"), envVar(v, "")} })},
		{name: "var already on", build: with(func(v string) []corev1.EnvVar {
			return []corev1.EnvVar{envVar(v, "on -XX:+UseSerialGC")}
		})},
		{name: "var from configmap", build: with(func(v string) []corev1.EnvVar {
			return []corev1.EnvVar{envVar("A", "1"), fromConfigMap(v), envVar("B", "2")}
		})},
		{name: "other vars from field and resource refs", build: single(
			corev1.EnvVar{Name: "POD", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.name"}}},
			corev1.EnvVar{Name: "MEM", ValueFrom: &corev1.EnvVarSource{ResourceFieldRef: &corev1.ResourceFieldSelector{
				Resource: "limits.memory", Divisor: resource.MustParse("1Mi"),
			}}},
		)},
		{name: "duplicate entries", build: with(func(v string) []corev1.EnvVar {
			return []corev1.EnvVar{envVar(v, "-Xmx1g"), envVar("A", "1"), envVar(v, orig)}
		})},
		{name: "envFrom", build: func(v string) corev1.PodTemplateSpec {
			c := app([]corev1.EnvVar{envVar("A", "1")})
			c.EnvFrom = []corev1.EnvFromSource{{ConfigMapRef: &corev1.ConfigMapEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: "cfg"}}}}
			return podTemplate(c)
		}},
		{name: "target second of two", container: "app", build: func(v string) corev1.PodTemplateSpec {
			side := corev1.Container{Name: "sidecar", Image: "proxy:1", Env: []corev1.EnvVar{envVar(v, "sidecar")}, Args: []string{"--side"}}
			return podTemplate(side, app([]corev1.EnvVar{envVar("A", "1"), envVar(v, orig)}))
		}},
		{name: "args nil", build: single(envVar("A", "1"))},
		{name: "args empty", build: func(string) corev1.PodTemplateSpec {
			c := app(nil)
			c.Args = []string{}
			return podTemplate(c)
		}},
		{name: "args and command", build: func(string) corev1.PodTemplateSpec {
			c := app(nil)
			c.Command = []string{"/server"}
			c.Args = []string{"--port=8080", "--memory-tracking"}
			return podTemplate(c)
		}},
		{name: "full container and init container", build: fullTemplate},
	}
}

// fullTemplate has most container fields set, so a change outside the toggled
// field shows up in the byte comparison.
func fullTemplate(v string) corev1.PodTemplateSpec {
	c := app([]corev1.EnvVar{envVar("A", "1"), envVar(v, orig)})
	c.Command = []string{"java", "-jar", "/app.jar"}
	c.Args = []string{"--server.port=8080"}
	c.Ports = []corev1.ContainerPort{{Name: "http", ContainerPort: 8080}}
	c.Resources = corev1.ResourceRequirements{Limits: corev1.ResourceList{
		corev1.ResourceCPU: resource.MustParse("2"), corev1.ResourceMemory: resource.MustParse("4Gi"),
	}}
	c.ReadinessProbe = &corev1.Probe{ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/ready", Port: intstr.FromString("http")}}}
	c.VolumeMounts = []corev1.VolumeMount{{Name: "tmp", MountPath: "/tmp"}}
	t := podTemplate(c)
	t.Annotations = map[string]string{"a": "b"}
	t.Spec.InitContainers = []corev1.Container{{Name: "init", Image: "busybox", Env: []corev1.EnvVar{envVar(v, "init")}}}
	t.Spec.Volumes = []corev1.Volume{{Name: "tmp", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}}}
	return t
}

// toggleCase is a toggle with the variable name its shapes are built for.
type toggleCase struct {
	name    string
	varName string
	spec    perfv1.ToggleSpec
}

func toggleCases() []toggleCase {
	return []toggleCase{
		{"env set", "FEATURE", perfv1.ToggleSpec{Env: &perfv1.EnvToggle{Name: "FEATURE", Value: ptr("on")}}},
		{"env set to the original value", "FEATURE", perfv1.ToggleSpec{Env: &perfv1.EnvToggle{Name: "FEATURE", Value: ptr(orig)}}},
		{"env remove", "FEATURE", perfv1.ToggleSpec{Env: &perfv1.EnvToggle{Name: "FEATURE", Remove: true}}},
		{"jvmOption", JavaToolOptions, perfv1.ToggleSpec{JVMOption: "-XX:+UseSerialGC"}},
		{"args one", "FEATURE", perfv1.ToggleSpec{Args: []string{"--memory-tracking"}}},
		{"args several", "FEATURE", perfv1.ToggleSpec{Args: []string{"--a", "--b=1"}}},
	}
}

// scenarios are the call sequences after Capture; each must leave the template
// exactly as it was.
var scenarios = []struct {
	name  string
	steps string // a = Apply, r = Revert, p = restart: the record is re-read from its JSON
}{
	{"apply revert", "ar"},
	{"apply twice then revert", "aar"},
	{"apply then revert twice", "arr"},
	{"revert without apply", "r"},
	{"apply, restart, revert", "apr"},
	{"two stages", "arar"},
}

// TestRoundTrip is the package's key property: Capture, then any sequence of
// Apply and Revert ending in Revert, leaves the pod template byte-for-byte and
// value-for-value (nil versus empty included) what it was.
func TestRoundTrip(t *testing.T) {
	for _, tc := range toggleCases() {
		for _, sh := range shapes() {
			for _, sc := range scenarios {
				t.Run(tc.name+"/"+sh.name+"/"+sc.name, func(t *testing.T) {
					checkRoundTrip(t, &tc.spec, sh.build(tc.varName), sh.container, sc.steps)
				})
			}
		}
	}
}

func checkRoundTrip(t *testing.T, spec *perfv1.ToggleSpec, before corev1.PodTemplateSpec, container, steps string) {
	t.Helper()
	tmpl := *before.DeepCopy()
	rec, err := Capture(spec, &tmpl, container)
	if spec.JVMOption != "" && hasValueFrom(&before, container) {
		if !errors.Is(err, ErrNotMergeable) {
			t.Fatalf("Capture = %v, want ErrNotMergeable", err)
		}
		return
	}
	if err != nil {
		t.Fatalf("Capture: %v", err)
	}
	mustEqual(t, "Capture changed the template", &tmpl, &before)
	noop := before.DeepCopy()
	if err := Apply(spec, noop, rec); err != nil {
		t.Fatalf("Apply: %v", err)
	}
	isNoop := reflect.DeepEqual(noop, &before)
	var applied *corev1.PodTemplateSpec
	for _, step := range steps {
		switch step {
		case 'a':
			if err := Apply(spec, &tmpl, rec); err != nil {
				t.Fatalf("Apply: %v", err)
			}
			if applied != nil {
				mustEqual(t, "applying twice differs from once", &tmpl, applied)
			}
			applied = tmpl.DeepCopy()
			checkApplied(t, spec, &before, &tmpl, rec)
		case 'r':
			if err := Revert(&tmpl, rec); err != nil {
				t.Fatalf("Revert: %v", err)
			}
			mustEqual(t, "Revert did not restore the template", &tmpl, &before)
			if ok, err := IsReverted(&tmpl, rec); err != nil || !ok {
				t.Fatalf("IsReverted after Revert = %v, %v", ok, err)
			}
			if ok, err := IsApplied(spec, &tmpl, rec); err != nil || ok != isNoop {
				t.Fatalf("IsApplied after Revert = %v, %v; the toggle changes nothing here: %v", ok, err, isNoop)
			}
		case 'p':
			rec = restart(t, rec)
		}
	}
}

// checkApplied checks what holds after any Apply: the toggle is in effect and
// nothing but the target container's env or args changed.
func checkApplied(t *testing.T, spec *perfv1.ToggleSpec, before, after *corev1.PodTemplateSpec, rec Record) {
	t.Helper()
	if ok, err := IsApplied(spec, after, rec); err != nil || !ok {
		t.Fatalf("IsApplied after Apply = %v, %v", ok, err)
	}
	noop := reflect.DeepEqual(before, after)
	if ok, _ := IsApplied(spec, before, rec); ok != noop {
		t.Errorf("IsApplied before Apply = %v, but Apply changed the template: %v", ok, !noop)
	}
	if ok, _ := IsReverted(after, rec); ok != noop {
		t.Errorf("IsReverted after Apply = %v, but Apply changed the template: %v", ok, !noop)
	}
	// Put back the fields the toggle owns; everything else must be untouched.
	masked := after.DeepCopy()
	i, _ := ContainerIndex(masked, rec.Container)
	if rec.Kind == KindArgs {
		masked.Spec.Containers[i].Args = before.Spec.Containers[i].Args
	} else {
		masked.Spec.Containers[i].Env = before.Spec.Containers[i].Env
	}
	mustEqual(t, "Apply changed more than the toggled field", masked, before)
}

// restart simulates an operator restart: only the record's JSON survives.
func restart(t *testing.T, rec Record) Record {
	t.Helper()
	s, err := rec.Marshal()
	if err != nil {
		t.Fatalf("Marshal: %v", err)
	}
	got, err := ParseRecord(s)
	if err != nil {
		t.Fatalf("ParseRecord(%s): %v", s, err)
	}
	if s2, _ := got.Marshal(); s2 != s {
		t.Fatalf("record changed through JSON:\n%s\n%s", s, s2)
	}
	return got
}

func hasValueFrom(tmpl *corev1.PodTemplateSpec, container string) bool {
	i, _ := ContainerIndex(tmpl, container)
	for _, e := range tmpl.Spec.Containers[i].Env {
		if e.Name == JavaToolOptions && e.ValueFrom != nil {
			return true
		}
	}
	return false
}

// mustEqual compares both the JSON the apiserver would receive and the Go
// values, because JSON cannot tell nil from empty slices.
func mustEqual(t *testing.T, msg string, got, want *corev1.PodTemplateSpec) {
	t.Helper()
	g, _ := json.Marshal(got)
	w, _ := json.Marshal(want)
	if string(g) != string(w) {
		t.Fatalf("%s:\n got %s\nwant %s", msg, g, w)
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("%s: same JSON but different values (nil versus empty?):\n got %#v\nwant %#v", msg, got.Spec.Containers, want.Spec.Containers)
	}
}

// TestRoundTripRandom runs the key property over generated templates: random env
// lists (duplicates, valueFrom, nil and empty), args, containers and toggles.
func TestRoundTripRandom(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	names := []string{"FEATURE", JavaToolOptions, "A", "B"}
	toggles := toggleCases()
	for n := range 2000 {
		tc := toggles[rng.IntN(len(toggles))]
		cs := make([]corev1.Container, 1+rng.IntN(3))
		for i := range cs {
			cs[i] = randomContainer(rng, fmt.Sprintf("c%d", i), names)
		}
		before := podTemplate(cs...)
		container := ""
		if rng.IntN(2) == 0 {
			container = cs[rng.IntN(len(cs))].Name
		}
		steps := scenarios[rng.IntN(len(scenarios))].steps
		t.Run(fmt.Sprint(n), func(t *testing.T) {
			checkRoundTrip(t, &tc.spec, before, container, steps)
		})
	}
}

func randomContainer(rng *rand.Rand, name string, names []string) corev1.Container {
	c := corev1.Container{Name: name, Image: "img"}
	switch rng.IntN(3) {
	case 1:
		c.Env = []corev1.EnvVar{}
	case 2:
		for range rng.IntN(6) {
			v := names[rng.IntN(len(names))]
			if rng.IntN(5) == 0 {
				c.Env = append(c.Env, fromConfigMap(v))
			} else {
				c.Env = append(c.Env, envVar(v, []string{"", "x", orig, "-XX:+UseSerialGC"}[rng.IntN(4)]))
			}
		}
	}
	switch rng.IntN(3) {
	case 1:
		c.Args = []string{}
	case 2:
		c.Args = []string{"--x", "--memory-tracking"}[:1+rng.IntN(2)]
	}
	return c
}
