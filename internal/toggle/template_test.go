package toggle

import (
	"errors"
	"reflect"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"

	perfv1 "perfexp.dev/perf-operator/api/v1alpha1"
)

var (
	envOn      = perfv1.ToggleSpec{Env: &perfv1.EnvToggle{Name: "FEATURE", Value: ptr("on")}}
	envRemove  = perfv1.ToggleSpec{Env: &perfv1.EnvToggle{Name: "FEATURE", Remove: true}}
	serialGC   = perfv1.ToggleSpec{JVMOption: "-XX:+UseSerialGC"}
	tracking   = perfv1.ToggleSpec{Args: []string{"--memory-tracking"}}
	httpToggle = perfv1.ToggleSpec{HTTP: &perfv1.HTTPToggle{
		HTTPRequest: perfv1.HTTPRequest{Path: "/admin/profiling"}, Port: 8080, Revert: perfv1.HTTPRequest{Path: "/admin/profiling"},
	}}
)

// TestApply pins what the target looks like while the toggle is on.
func TestApply(t *testing.T) {
	tests := []struct {
		name     string
		spec     perfv1.ToggleSpec
		env      []corev1.EnvVar
		args     []string
		wantEnv  []corev1.EnvVar
		wantArgs []string
	}{
		{name: "env set on nil env", spec: envOn,
			wantEnv: []corev1.EnvVar{envVar("FEATURE", "on")}},
		{name: "env set appends a new variable", spec: envOn,
			env:     []corev1.EnvVar{envVar("A", "1"), envVar("B", "2")},
			wantEnv: []corev1.EnvVar{envVar("A", "1"), envVar("B", "2"), envVar("FEATURE", "on")}},
		{name: "env set keeps the position", spec: envOn,
			env:     []corev1.EnvVar{envVar("A", "1"), envVar("FEATURE", "off"), envVar("B", "2")},
			wantEnv: []corev1.EnvVar{envVar("A", "1"), envVar("FEATURE", "on"), envVar("B", "2")}},
		{name: "env set replaces valueFrom", spec: envOn,
			env:     []corev1.EnvVar{fromConfigMap("FEATURE"), envVar("A", "1")},
			wantEnv: []corev1.EnvVar{envVar("FEATURE", "on"), envVar("A", "1")}},
		{name: "env set folds duplicates into the first position", spec: envOn,
			env:     []corev1.EnvVar{envVar("FEATURE", "x"), envVar("A", "1"), envVar("FEATURE", "y")},
			wantEnv: []corev1.EnvVar{envVar("FEATURE", "on"), envVar("A", "1")}},
		{name: "env remove", spec: envRemove,
			env:     []corev1.EnvVar{envVar("A", "1"), envVar("FEATURE", "on"), envVar("B", "2")},
			wantEnv: []corev1.EnvVar{envVar("A", "1"), envVar("B", "2")}},
		{name: "env remove of an absent variable changes nothing", spec: envRemove,
			env:     []corev1.EnvVar{envVar("A", "1")},
			wantEnv: []corev1.EnvVar{envVar("A", "1")}},
		{name: "jvmOption creates JAVA_TOOL_OPTIONS", spec: serialGC,
			env:     []corev1.EnvVar{envVar("A", "1")},
			wantEnv: []corev1.EnvVar{envVar("A", "1"), envVar(JavaToolOptions, "-XX:+UseSerialGC")}},
		{name: "jvmOption appends to what is there", spec: serialGC,
			env:     []corev1.EnvVar{envVar(JavaToolOptions, "-Xmx512m  -Dx=1"), envVar("A", "1")},
			wantEnv: []corev1.EnvVar{envVar(JavaToolOptions, "-Xmx512m  -Dx=1 -XX:+UseSerialGC"), envVar("A", "1")}},
		{name: "jvmOption fills an empty value", spec: serialGC,
			env:     []corev1.EnvVar{envVar(JavaToolOptions, "")},
			wantEnv: []corev1.EnvVar{envVar(JavaToolOptions, "-XX:+UseSerialGC")}},
		{name: "jvmOption already present changes nothing", spec: serialGC,
			env:     []corev1.EnvVar{envVar(JavaToolOptions, "-XX:+UseSerialGC -Xmx1g")},
			wantEnv: []corev1.EnvVar{envVar(JavaToolOptions, "-XX:+UseSerialGC -Xmx1g")}},
		{name: "jvmOption matches whole options only", spec: perfv1.ToggleSpec{JVMOption: "-Xmx1g"},
			env:     []corev1.EnvVar{envVar(JavaToolOptions, "-Xmx1g2")},
			wantEnv: []corev1.EnvVar{envVar(JavaToolOptions, "-Xmx1g2 -Xmx1g")}},
		{name: "jvmOption merges into the last duplicate, which the JVM uses", spec: serialGC,
			env:     []corev1.EnvVar{envVar(JavaToolOptions, "-Xmx1g"), envVar("A", "1"), envVar(JavaToolOptions, "-Xmx2g")},
			wantEnv: []corev1.EnvVar{envVar(JavaToolOptions, "-Xmx2g -XX:+UseSerialGC"), envVar("A", "1")}},
		{name: "args on nil args", spec: tracking,
			wantArgs: []string{"--memory-tracking"}},
		{name: "args appended", spec: perfv1.ToggleSpec{Args: []string{"--a", "--b"}},
			args: []string{"--port=8080"}, wantArgs: []string{"--port=8080", "--a", "--b"}},
		{name: "args already there are appended again", spec: tracking,
			args: []string{"--memory-tracking"}, wantArgs: []string{"--memory-tracking", "--memory-tracking"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := app(tt.env)
			c.Args = tt.args
			tmpl := podTemplate(c)
			rec, err := Capture(&tt.spec, &tmpl, "")
			if err != nil {
				t.Fatal(err)
			}
			if err := Apply(&tt.spec, &tmpl, rec); err != nil {
				t.Fatal(err)
			}
			got := tmpl.Spec.Containers[0]
			if len(got.Env) != 0 || len(tt.wantEnv) != 0 {
				if !reflect.DeepEqual(got.Env, tt.wantEnv) {
					t.Errorf("env = %v, want %v", got.Env, tt.wantEnv)
				}
			}
			if !reflect.DeepEqual(got.Args, tt.wantArgs) {
				t.Errorf("args = %q, want %q", got.Args, tt.wantArgs)
			}
		})
	}
}

// TestRevertAfterOthersChanged pins the documented choice: Revert restores the
// toggled variable (or args) to the record, overwriting a change someone made to
// it while the toggle was on, and keeps every other change.
func TestRevertAfterOthersChanged(t *testing.T) {
	tmpl := podTemplate(app([]corev1.EnvVar{envVar("A", "1"), envVar("FEATURE", "off"), envVar("B", "2")}))
	rec, err := Capture(&envOn, &tmpl, "app")
	if err != nil {
		t.Fatal(err)
	}
	if err := Apply(&envOn, &tmpl, rec); err != nil {
		t.Fatal(err)
	}
	c := &tmpl.Spec.Containers[0]
	c.Image = "shop:2"
	c.Env = []corev1.EnvVar{envVar("FEATURE", "manual"), envVar("A", "changed"), envVar("B", "2"), envVar("C", "new")}
	if err := Revert(&tmpl, rec); err != nil {
		t.Fatal(err)
	}
	want := []corev1.EnvVar{envVar("A", "changed"), envVar("FEATURE", "off"), envVar("B", "2"), envVar("C", "new")}
	if !reflect.DeepEqual(c.Env, want) || c.Image != "shop:2" {
		t.Errorf("after Revert: image %s, env %v; want image shop:2, env %v", c.Image, c.Env, want)
	}

	// args: the recorded args come back whole; other fields stay.
	tmpl = podTemplate(corev1.Container{Name: "app", Args: []string{"--port=1"}})
	rec, _ = Capture(&tracking, &tmpl, "")
	_ = Apply(&tracking, &tmpl, rec)
	tmpl.Spec.Containers[0].Args = append(tmpl.Spec.Containers[0].Args, "--extra")
	tmpl.Spec.Containers[0].Command = []string{"/new"}
	_ = Revert(&tmpl, rec)
	if got := tmpl.Spec.Containers[0]; !reflect.DeepEqual(got.Args, []string{"--port=1"}) || got.Command[0] != "/new" {
		t.Errorf("after Revert: args %q, command %q", got.Args, got.Command)
	}
}

// TestRevertFromRecordAlone restores a template from an annotation value written
// by an earlier operator; it also pins the record's JSON format, which must stay
// readable across operator upgrades.
func TestRevertFromRecordAlone(t *testing.T) {
	tests := []struct {
		name, record     string
		applied, want    corev1.Container
		wantContainerNil bool
	}{
		{name: "env restored at its position with valueFrom",
			record:  `{"version":1,"kind":"env","container":"app","env":{"name":"FEATURE","entries":[{"index":1,"var":{"name":"FEATURE","valueFrom":{"configMapKeyRef":{"name":"settings","key":"k","optional":true}}}}]}}`,
			applied: app([]corev1.EnvVar{envVar("A", "1"), envVar("FEATURE", "on")}),
			want:    app([]corev1.EnvVar{envVar("A", "1"), fromConfigMap("FEATURE")})},
		{name: "env absent before and nil list",
			record:  `{"version":1,"kind":"env","container":"app","env":{"name":"FEATURE","listNil":true}}`,
			applied: app([]corev1.EnvVar{envVar("FEATURE", "on")}),
			want:    app(nil)},
		{name: "jvmOption",
			record:  `{"version":1,"kind":"jvmOption","container":"app","env":{"name":"JAVA_TOOL_OPTIONS","entries":[{"index":0,"var":{"name":"JAVA_TOOL_OPTIONS","value":"-Xmx1g"}}]}}`,
			applied: app([]corev1.EnvVar{envVar(JavaToolOptions, "-Xmx1g -XX:+UseSerialGC")}),
			want:    app([]corev1.EnvVar{envVar(JavaToolOptions, "-Xmx1g")})},
		{name: "args nil",
			record:  `{"version":1,"kind":"args","container":"app","args":{"nil":true}}`,
			applied: corev1.Container{Name: "app", Args: []string{"--memory-tracking"}},
			want:    corev1.Container{Name: "app"}},
		{name: "args empty",
			record:  `{"version":1,"kind":"args","container":"app","args":{}}`,
			applied: corev1.Container{Name: "app", Args: []string{"--memory-tracking"}},
			want:    corev1.Container{Name: "app", Args: []string{}}},
		{name: "unknown fields from a newer operator are ignored",
			record:  `{"version":1,"kind":"args","container":"app","args":{"original":["-v"],"appended":["--x"]},"note":"x"}`,
			applied: corev1.Container{Name: "app", Args: []string{"-v", "--x"}},
			want:    corev1.Container{Name: "app", Args: []string{"-v"}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rec, err := ParseRecord(tt.record)
			if err != nil {
				t.Fatal(err)
			}
			tmpl := podTemplate(corev1.Container{Name: "sidecar"}, tt.applied)
			if err := Revert(&tmpl, rec); err != nil {
				t.Fatal(err)
			}
			want := podTemplate(corev1.Container{Name: "sidecar"}, tt.want)
			mustEqual(t, "Revert", &tmpl, &want)
		})
	}
}

func TestRecordMarshalFormat(t *testing.T) {
	tmpl := podTemplate(corev1.Container{Name: "side"}, app([]corev1.EnvVar{envVar("A", "1"), envVar("FEATURE", "off")}))
	rec, err := Capture(&envOn, &tmpl, "app")
	if err != nil {
		t.Fatal(err)
	}
	got, err := rec.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	want := `{"version":1,"kind":"env","container":"app","env":{"name":"FEATURE","entries":[{"index":1,"var":{"name":"FEATURE","value":"off"}}]}}`
	if got != want {
		t.Errorf("Marshal =\n%s\nwant\n%s", got, want)
	}
	// The record holds the resolved container name, not "".
	rec, _ = Capture(&tracking, &tmpl, "")
	if rec.Container != "side" {
		t.Errorf("Container = %q, want side", rec.Container)
	}
	if _, err := (Record{}).Marshal(); !errors.Is(err, ErrInvalidRecord) {
		t.Errorf("Marshal of an empty record = %v, want ErrInvalidRecord", err)
	}
}

func TestParseRecordErrors(t *testing.T) {
	tests := []struct{ name, record, want string }{
		{"empty", ``, "empty"},
		{"not JSON", `perfexp`, "not valid JSON"},
		{"other version", `{"version":2,"kind":"env","container":"app","env":{"name":"X"}}`, "version 2"},
		{"no container", `{"version":1,"kind":"args","args":{}}`, "no container"},
		{"unknown kind", `{"version":1,"kind":"rpc","container":"app"}`, `kind "rpc"`},
		{"http kind with args", `{"version":1,"kind":"http","container":"app","args":{}}`, "no env and no args"},
		{"env kind without env", `{"version":1,"kind":"env","container":"app","args":{}}`, "must hold env"},
		{"args kind without args", `{"version":1,"kind":"args","container":"app"}`, "must hold args"},
		{"jvm record for another variable", `{"version":1,"kind":"jvmOption","container":"app","env":{"name":"JAVA_OPTS"}}`, "JAVA_OPTS"},
		{"entry of another variable", `{"version":1,"kind":"env","container":"app","env":{"name":"X","entries":[{"index":0,"var":{"name":"Y"}}]}}`, "entry for Y"},
		{"indices not ascending", `{"version":1,"kind":"env","container":"app","env":{"name":"X","entries":[{"index":2,"var":{"name":"X"}},{"index":1,"var":{"name":"X"}}]}}`, "ascending"},
		{"nil list with entries", `{"version":1,"kind":"env","container":"app","env":{"name":"X","listNil":true,"entries":[{"index":0,"var":{"name":"X"}}]}}`, "nil"},
		{"nil args with args", `{"version":1,"kind":"args","container":"app","args":{"nil":true,"original":["a"]}}`, "nil"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := ParseRecord(tt.record)
			if !errors.Is(err, ErrInvalidRecord) || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("ParseRecord = %v, want ErrInvalidRecord mentioning %q", err, tt.want)
			}
		})
	}
}

func TestContainerIndex(t *testing.T) {
	two := podTemplate(corev1.Container{Name: "web"}, corev1.Container{Name: "sidecar"})
	tests := []struct {
		name    string
		tmpl    corev1.PodTemplateSpec
		want    int
		wantErr string
	}{
		{name: "empty name is the first", tmpl: two, want: 0},
		{name: "by name", tmpl: two, want: 1},
		{name: "missing", tmpl: two, want: -1, wantErr: `container "app" is not in the pod template (it has web, sidecar)`},
		{name: "no containers", tmpl: podTemplate(), want: -1, wantErr: "no containers"},
	}
	names := map[string]string{"by name": "sidecar", "missing": "app"}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ContainerIndex(&tt.tmpl, names[tt.name])
			if got != tt.want {
				t.Errorf("index = %d, want %d", got, tt.want)
			}
			if tt.wantErr == "" && err != nil || tt.wantErr != "" && (!errors.Is(err, ErrContainerNotFound) || !strings.Contains(err.Error(), tt.wantErr)) {
				t.Errorf("err = %v, want ErrContainerNotFound with %q", err, tt.wantErr)
			}
		})
	}
}

// TestErrors covers every refusal and checks it leaves the template untouched.
func TestErrors(t *testing.T) {
	base := podTemplate(app([]corev1.EnvVar{fromConfigMap(JavaToolOptions)}))
	envRec, _ := Capture(&envOn, base.DeepCopy(), "")
	other := perfv1.ToggleSpec{Env: &perfv1.EnvToggle{Name: "OTHER", Value: ptr("1")}}
	both := perfv1.ToggleSpec{Env: &perfv1.EnvToggle{Name: "FEATURE", Value: ptr("1"), Remove: true}}
	gone := envRec
	gone.Container = "gone"
	tests := []struct {
		name string
		run  func(*corev1.PodTemplateSpec) error
		kind error
		want string
	}{
		{"jvmOption into valueFrom", func(p *corev1.PodTemplateSpec) error { _, err := Capture(&serialGC, p, ""); return err },
			ErrNotMergeable, `container "app" sets JAVA_TOOL_OPTIONS with valueFrom`},
		{"no toggle", func(p *corev1.PodTemplateSpec) error { _, err := Capture(&perfv1.ToggleSpec{}, p, ""); return err },
			ErrInvalidSpec, "sets 0 kinds"},
		{"two toggles", func(p *corev1.PodTemplateSpec) error {
			_, err := Capture(&perfv1.ToggleSpec{JVMOption: "-Xmx1g", Args: []string{"-v"}}, p, "")
			return err
		}, ErrInvalidSpec, "sets 2 kinds"},
		{"http in a missing container", func(p *corev1.PodTemplateSpec) error { _, err := Capture(&httpToggle, p, "db"); return err },
			ErrContainerNotFound, `"db"`},
		{"missing container", func(p *corev1.PodTemplateSpec) error { _, err := Capture(&envOn, p, "db"); return err },
			ErrContainerNotFound, `"db"`},
		{"value and remove", func(p *corev1.PodTemplateSpec) error { _, err := Capture(&both, p, ""); return err },
			ErrInvalidSpec, "exactly one"},
		{"apply with another kind's record", func(p *corev1.PodTemplateSpec) error { return Apply(&tracking, p, envRec) },
			ErrInvalidRecord, "env toggle"},
		{"apply with another variable's record", func(p *corev1.PodTemplateSpec) error { return Apply(&other, p, envRec) },
			ErrInvalidRecord, "FEATURE"},
		{"apply to a missing container", func(p *corev1.PodTemplateSpec) error { return Apply(&envOn, p, gone) },
			ErrContainerNotFound, `"gone"`},
		{"revert an invalid record", func(p *corev1.PodTemplateSpec) error { return Revert(p, Record{}) },
			ErrInvalidRecord, "version 0"},
		{"is applied with another kind's record", func(p *corev1.PodTemplateSpec) error { _, err := IsApplied(&tracking, p, envRec); return err },
			ErrInvalidRecord, "env toggle"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tmpl := base.DeepCopy()
			err := tt.run(tmpl)
			if !errors.Is(err, tt.kind) || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("err = %v, want %v mentioning %s", err, tt.kind, tt.want)
			}
			mustEqual(t, "a refused call changed the template", tmpl, &base)
		})
	}
}

// TestRevertWithContainerGone: nothing of the toggle is left, so cleanup must
// not be blocked.
func TestRevertWithContainerGone(t *testing.T) {
	tmpl := podTemplate(app(nil))
	rec, _ := Capture(&envOn, &tmpl, "")
	_ = Apply(&envOn, &tmpl, rec)
	tmpl.Spec.Containers[0].Name = "renamed"
	before := tmpl.DeepCopy()
	if err := Revert(&tmpl, rec); err != nil {
		t.Fatalf("Revert = %v, want nil", err)
	}
	mustEqual(t, "Revert touched another container", &tmpl, before)
	if ok, err := IsReverted(&tmpl, rec); !ok || err != nil {
		t.Errorf("IsReverted = %v, %v; want true", ok, err)
	}
}

// TestRecordIsIndependent: changing the template after Capture must not change
// the record, or Revert would restore the change.
func TestRecordIsIndependent(t *testing.T) {
	tmpl := podTemplate(app([]corev1.EnvVar{fromConfigMap("FEATURE")}))
	rec, _ := Capture(&envOn, &tmpl, "")
	tmpl.Spec.Containers[0].Env[0].ValueFrom.ConfigMapKeyRef.Key = "changed"
	if k := rec.Env.Entries[0].Var.ValueFrom.ConfigMapKeyRef.Key; k != "k" {
		t.Errorf("record changed with the template: key %q", k)
	}
	argsTmpl := podTemplate(corev1.Container{Name: "app", Args: []string{"a"}})
	argsRec, _ := Capture(&tracking, &argsTmpl, "")
	_ = Apply(&tracking, &argsTmpl, argsRec)
	argsTmpl.Spec.Containers[0].Args[0] = "changed"
	_ = Revert(&argsTmpl, argsRec)
	if got := argsTmpl.Spec.Containers[0].Args; !reflect.DeepEqual(got, []string{"a"}) {
		t.Errorf("args after Revert = %q, want [a]", got)
	}
}

func TestRollsPods(t *testing.T) {
	tests := []struct {
		spec perfv1.ToggleSpec
		want bool
	}{
		{envOn, true}, {envRemove, true}, {serialGC, true}, {tracking, true},
		{httpToggle, false},
		{perfv1.ToggleSpec{}, false},
	}
	for _, tt := range tests {
		if got := tt.spec.RollsPods(); got != tt.want {
			t.Errorf("RollsPods(%s) = %v, want %v", tt.spec.Kind(), got, tt.want)
		}
	}
}

// TestHTTPRecord: an http toggle is captured like the others, so preflight is the
// same for every kind, but its record restores nothing and Apply and Revert leave
// the template alone.
func TestHTTPRecord(t *testing.T) {
	before := fullTemplate("FEATURE")
	tmpl := *before.DeepCopy()
	rec, err := Capture(&httpToggle, &tmpl, "")
	if err != nil {
		t.Fatal(err)
	}
	s, err := rec.Marshal()
	if want := `{"version":1,"kind":"http","container":"app"}`; err != nil || s != want {
		t.Errorf("Marshal = %s, %v; want %s", s, err, want)
	}
	rec = restart(t, rec)
	if err := Apply(&httpToggle, &tmpl, rec); err != nil {
		t.Fatal(err)
	}
	mustEqual(t, "Apply of an http toggle changed the template", &tmpl, &before)
	if ok, err := IsApplied(&httpToggle, &tmpl, rec); ok || err != nil {
		t.Errorf("IsApplied = %v, %v; want false", ok, err)
	}
	if err := Revert(&tmpl, rec); err != nil {
		t.Fatal(err)
	}
	mustEqual(t, "Revert of an http toggle changed the template", &tmpl, &before)
	if ok, err := IsReverted(&tmpl, rec); !ok || err != nil {
		t.Errorf("IsReverted = %v, %v; want true", ok, err)
	}
	if err := Apply(&envOn, &tmpl, rec); !errors.Is(err, ErrInvalidRecord) {
		t.Errorf("Apply of env with an http record = %v, want ErrInvalidRecord", err)
	}
}
