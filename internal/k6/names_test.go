package k6

import (
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/util/validation"

	perfv1 "perfexp.dev/perf-operator/api/v1alpha1"
)

var (
	long60   = strings.Repeat("a", 50) + "-perf-test" // 60 characters
	long253  = strings.Repeat("experiment-", 23)[:253]
	treatS12 = Window{Stage: 12, Variant: perfv1.VariantTreatment}
)

func TestJobName(t *testing.T) {
	cases := []struct {
		name       string
		experiment string
		w          Window
		want       string // exact, or "" to check only the shape
		wantSuffix string
	}{
		{"treatment", "profiling-overhead", Window{Stage: 1, Variant: perfv1.VariantTreatment}, "profiling-overhead-s1-treatment", ""},
		{"warm-up", "x", Window{Stage: -1, Variant: perfv1.VariantWarmup}, "x-warmup", ""},
		{"settle after the toggle", "x", Window{Stage: 0, Variant: perfv1.VariantSettle}, "x-s0-settle-on", ""},
		{"settle after the revert", "x", Window{Stage: 0, Variant: perfv1.VariantSettle, ToggleOff: true}, "x-s0-settle-off", ""},
		{"exactly 63", strings.Repeat("b", 49), treatS12, strings.Repeat("b", 49) + "-s12-treatment", ""},
		{"one too long", strings.Repeat("b", 50), treatS12, "", "-s12-treatment"},
		{"long", long60, treatS12, "", "-s12-treatment"},
		{"longest", long253, Window{Stage: -1, Variant: perfv1.VariantWarmup}, "", "-warmup"},
		{"a variant's treatment", "gc-choice", Window{Stage: 0, Variant: perfv1.VariantTreatment, Arm: "serial"}, "gc-choice-s0-treatment-serial", ""},
		{"settle after a variant's revert", "gc-choice", Window{Stage: 2, Variant: perfv1.VariantSettle, ToggleOff: true, Arm: "parallel"}, "gc-choice-s2-settle-off-parallel", ""},
		{"long with a variant", long60, Window{Stage: 12, Variant: perfv1.VariantSettle, ToggleOff: true, Arm: strings.Repeat("g", 20)}, "", "-s12-settle-off-" + strings.Repeat("g", 20)},
		{"dots", "shop.checkout", Window{Stage: 0, Variant: perfv1.VariantBaseline}, "", "-s0-baseline"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := JobName(tc.experiment, tc.w)
			if errs := validation.IsDNS1123Label(got); len(errs) > 0 {
				t.Errorf("%q: %v", got, errs)
			}
			if tc.want != "" && got != tc.want {
				t.Errorf("got %q, want %q", got, tc.want)
			}
			if tc.wantSuffix != "" && !strings.HasSuffix(got, tc.wantSuffix) {
				t.Errorf("%q lost its window suffix %q", got, tc.wantSuffix)
			}
			if again := JobName(tc.experiment, tc.w); again != got {
				t.Errorf("not deterministic: %q then %q", got, again)
			}
		})
	}
}

// TestJobNamesAreUnique covers every window of the longest plan, for names that
// are kept and names that are shortened, and two long names that share a prefix.
func TestJobNamesAreUnique(t *testing.T) {
	for _, experiment := range []string{"short", long60, long253, long253[:252] + "z"} {
		windows := []Window{{Stage: -1, Variant: perfv1.VariantWarmup}}
		for s := int32(0); s < 20; s++ {
			for _, v := range []perfv1.Variant{perfv1.VariantBaseline, perfv1.VariantSettle, perfv1.VariantTreatment} {
				windows = append(windows, Window{Stage: s, Variant: v})
			}
			windows = append(windows, Window{Stage: s, Variant: perfv1.VariantSettle, ToggleOff: true})
			// Every variant's treatment and both its settle periods.
			for _, arm := range []string{"serial", "parallel", strings.Repeat("g", 20)} {
				windows = append(windows, Window{Stage: s, Variant: perfv1.VariantTreatment, Arm: arm},
					Window{Stage: s, Variant: perfv1.VariantSettle, Arm: arm},
					Window{Stage: s, Variant: perfv1.VariantSettle, ToggleOff: true, Arm: arm})
			}
		}
		seen := map[string]Window{}
		for _, w := range windows {
			name := JobName(experiment, w)
			if prev, dup := seen[name]; dup {
				t.Errorf("%s: windows %+v and %+v share %q", experiment[:5], prev, w, name)
			}
			seen[name] = w
		}
	}
	if a, b := JobName(long253, treatS12), JobName(long253[:252]+"z", treatS12); a == b {
		t.Errorf("two long experiments share %q", a)
	}
}

func TestScriptConfigMapName(t *testing.T) {
	if got := ScriptConfigMapName("profiling-overhead"); got != "profiling-overhead-k6" {
		t.Errorf("got %q", got)
	}
	got := ScriptConfigMapName(long253)
	if errs := validation.IsDNS1123Label(got); len(errs) > 0 || !strings.HasSuffix(got, "-k6") {
		t.Errorf("%q: %v", got, errs)
	}
}

func TestExperimentLabelValue(t *testing.T) {
	if got := ExperimentLabelValue("shop.checkout"); got != "shop.checkout" {
		t.Errorf("a valid label value was changed to %q", got)
	}
	got := ExperimentLabelValue(long253)
	if errs := validation.IsValidLabelValue(got); len(errs) > 0 {
		t.Errorf("%q: %v", got, errs)
	}
	if got == ExperimentLabelValue(long253[:252]+"z") {
		t.Error("two long experiments share a label value")
	}
}
