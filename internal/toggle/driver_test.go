package toggle

import (
	"context"
	"errors"
	"io"
	"testing"

	corev1 "k8s.io/api/core/v1"

	perfv1 "perfexp.dev/perf-operator/api/v1alpha1"
)

type noopExecutor struct{}

func (noopExecutor) Exec(context.Context, string, string, string, []string, io.Writer, io.Writer) error {
	return nil
}

func TestDriversForEveryKind(t *testing.T) {
	on := "on"
	for _, tc := range []struct {
		name    string
		spec    perfv1.ToggleSpec
		d       Drivers
		want    any
		wantErr error
	}{
		{"env", perfv1.ToggleSpec{Env: &perfv1.EnvToggle{Name: "X", Value: &on}}, Drivers{}, templateDriver{}, nil},
		{"jvmOption", perfv1.ToggleSpec{JVMOption: "-XX:+UseSerialGC"}, Drivers{}, templateDriver{}, nil},
		{"args", perfv1.ToggleSpec{Args: []string{"--x"}}, Drivers{}, templateDriver{}, nil},
		{"http", perfv1.ToggleSpec{HTTP: &perfv1.HTTPToggle{}}, Drivers{}, httpDriver{}, nil},
		{"exec", perfv1.ToggleSpec{Exec: &perfv1.ExecToggle{Command: []string{"true"}}}, Drivers{Exec: Execer{Executor: noopExecutor{}}}, execDriver{}, nil},
		{"exec without the right", perfv1.ToggleSpec{Exec: &perfv1.ExecToggle{Command: []string{"true"}}}, Drivers{}, nil, ErrExecDisabled},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d, err := tc.d.For(&tc.spec)
			if tc.wantErr != nil {
				if !errors.Is(err, tc.wantErr) || d != nil {
					t.Fatalf("got %T, %v; want %v", d, err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			switch tc.want.(type) {
			case templateDriver:
				_, ok := d.(templateDriver)
				if !ok {
					t.Fatalf("%T", d)
				}
			case httpDriver:
				if _, ok := d.(httpDriver); !ok {
					t.Fatalf("%T", d)
				}
			case execDriver:
				if _, ok := d.(execDriver); !ok {
					t.Fatalf("%T", d)
				}
			}
		})
	}
	if _, err := (Drivers{}).For(&perfv1.ToggleSpec{}); err == nil {
		t.Fatal("an empty toggle got a driver")
	}
}

// The template driver changes exactly what Apply and Revert change, so a round
// trip through it restores the template.
func TestTemplateDriverRoundTrip(t *testing.T) {
	on := "on"
	spec := perfv1.ToggleSpec{Env: &perfv1.EnvToggle{Name: "PROFILING", Value: &on}}
	tmpl := &corev1.PodTemplateSpec{Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Env: []corev1.EnvVar{{Name: "A", Value: "1"}}}}}}
	orig := tmpl.DeepCopy()
	rec, err := Capture(&spec, tmpl, "")
	if err != nil {
		t.Fatal(err)
	}
	d, _ := Drivers{}.For(&spec)
	if _, err := d.Apply(context.Background(), Target{Record: rec, Template: tmpl}); err != nil {
		t.Fatal(err)
	}
	if len(tmpl.Spec.Containers[0].Env) != 2 {
		t.Fatalf("not applied: %+v", tmpl.Spec.Containers[0].Env)
	}
	if err := d.Revert(context.Background(), Target{Record: rec, Template: tmpl}); err != nil {
		t.Fatal(err)
	}
	if tmpl.String() != orig.String() {
		t.Fatalf("not restored:\n%s\n%s", tmpl, orig)
	}
}
