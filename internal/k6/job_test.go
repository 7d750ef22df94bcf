package k6

import (
	"fmt"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/diff"
	"k8s.io/utils/ptr"

	perfv1 "perfexp.dev/perf-operator/api/v1alpha1"
)

var targetLabels = map[string]string{"app": "mall-gateway"}

// baseJob is the Job of testExperiment's baseline1 window, written out in full:
// every case below changes one thing of it.
func baseJob() *batchv1.Job {
	lbls := map[string]string{
		perfv1.LabelExperiment: "profiling-overhead",
		LabelStage:             "1",
		LabelVariant:           "baseline",
		LabelManagedBy:         "perf-operator",
	}
	return &batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{Name: "profiling-overhead-s1-baseline", Namespace: "shop", Labels: lbls},
		Spec: batchv1.JobSpec{
			Parallelism:    ptr.To[int32](1),
			Completions:    ptr.To[int32](1),
			CompletionMode: ptr.To(batchv1.IndexedCompletion),
			BackoffLimit:   ptr.To[int32](0),
			// 30m of load + 10s timeout + 5s margin (graceful stop) + 2m startup.
			ActiveDeadlineSeconds: ptr.To[int64](1935),
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: copyLabels(lbls)},
				Spec: corev1.PodSpec{
					RestartPolicy:                corev1.RestartPolicyNever,
					AutomountServiceAccountToken: ptr.To(false),
					EnableServiceLinks:           ptr.To(false),
					SecurityContext: &corev1.PodSecurityContext{
						RunAsNonRoot:   ptr.To(true),
						RunAsUser:      ptr.To[int64](12345),
						RunAsGroup:     ptr.To[int64](12345),
						FSGroup:        ptr.To[int64](12345),
						SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
					},
					Affinity: &corev1.Affinity{PodAntiAffinity: &corev1.PodAntiAffinity{
						PreferredDuringSchedulingIgnoredDuringExecution: []corev1.WeightedPodAffinityTerm{{
							Weight: 100,
							PodAffinityTerm: corev1.PodAffinityTerm{
								LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "mall-gateway"}},
								TopologyKey:   "kubernetes.io/hostname",
							},
						}},
					}},
					Containers: []corev1.Container{{
						Name:            "k6",
						Image:           "grafana/k6:1.8.1",
						ImagePullPolicy: corev1.PullIfNotPresent,
						Command:         []string{"k6", "run", "--quiet", "--address=0.0.0.0:6565", "--no-usage-report", "--include-system-env-vars", "/scripts/run.js"},
						Env: []corev1.EnvVar{
							{Name: "PERF_QPS", Value: "500"},
							{Name: "PERF_PODS", Value: "1"},
							{Name: "PERF_DURATION", Value: "30m0s"},
							{Name: "PERF_PREALLOCATED_VUS", Value: "500"},
							{Name: "PERF_MAX_VUS", Value: "1024"}, // 4×500, capped at 512Mi/2/256Ki
							{Name: "PERF_WINDOW", Value: "profiling-overhead-s1-baseline"},
							{Name: "K6_AUTO_EXTENSION_RESOLUTION", Value: "false"},
							{Name: "K6_NO_USAGE_REPORT", Value: "true"},
							{Name: "GOMEMLIMIT", Value: "483183820"}, // 90 % of 512Mi
						},
						// The REST API, read by the operator on every sample.
						Ports: []corev1.ContainerPort{{Name: "k6-api", ContainerPort: 6565, Protocol: corev1.ProtocolTCP}},
						Resources: corev1.ResourceRequirements{
							Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("500m"), corev1.ResourceMemory: resource.MustParse("256Mi")},
							Limits:   corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1"), corev1.ResourceMemory: resource.MustParse("512Mi")},
						},
						VolumeMounts: []corev1.VolumeMount{
							{Name: "scripts", MountPath: "/scripts", ReadOnly: true},
							{Name: "tmp", MountPath: "/tmp"},
						},
						SecurityContext: &corev1.SecurityContext{
							ReadOnlyRootFilesystem:   ptr.To(true),
							AllowPrivilegeEscalation: ptr.To(false),
							Capabilities:             &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
						},
						TerminationMessagePath:   "/dev/termination-log",
						TerminationMessagePolicy: corev1.TerminationMessageReadFile,
					}},
					Volumes: []corev1.Volume{
						{Name: "scripts", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{
							LocalObjectReference: corev1.LocalObjectReference{Name: "profiling-overhead-k6"},
						}}},
						{Name: "tmp", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}},
					},
				},
			},
		},
	}
}

func setEnv(job *batchv1.Job, name, value string) {
	env := job.Spec.Template.Spec.Containers[0].Env
	for i := range env {
		if env[i].Name == name {
			env[i].Value = value
			return
		}
	}
	panic("no env var " + name)
}

func setPods(job *batchv1.Job, n int32) {
	job.Spec.Parallelism, job.Spec.Completions = ptr.To(n), ptr.To(n)
}

func quantity(s string) *resource.Quantity {
	q := resource.MustParse(s)
	return &q
}

func TestBuildJob(t *testing.T) {
	cases := []struct {
		name   string
		exp    func(*perfv1.PerfExperiment)
		window func(*Window)
		labels map[string]string
		want   func(*batchv1.Job)
	}{
		{name: "base"},
		{
			name: "parallelism splits the VUs, not the window's QPS",
			exp:  func(e *perfv1.PerfExperiment) { e.Spec.Load.K6.Parallelism = 3 },
			want: func(j *batchv1.Job) {
				setPods(j, 3)
				setEnv(j, "PERF_PODS", "3")
				setEnv(j, "PERF_PREALLOCATED_VUS", "167") // ⌈500/3⌉ req/s × 1 s
				setEnv(j, "PERF_MAX_VUS", "668")
			},
		},
		{
			name:   "parallelism above the QPS runs one pod per req/s",
			exp:    func(e *perfv1.PerfExperiment) { e.Spec.Load.K6.Parallelism = 5 },
			window: func(w *Window) { w.QPS = 3 },
			want: func(j *batchv1.Job) {
				setPods(j, 3)
				setEnv(j, "PERF_QPS", "3")
				setEnv(j, "PERF_PODS", "3")
				setEnv(j, "PERF_PREALLOCATED_VUS", "10")
				setEnv(j, "PERF_MAX_VUS", "100")
			},
		},
		{
			name: "resources: a set request above the default limit raises the limit",
			exp: func(e *perfv1.PerfExperiment) {
				e.Spec.Load.K6.Resources = &perfv1.ResourcesSpec{
					Requests: &perfv1.ResourceAmounts{CPU: quantity("2")},
					Limits:   &perfv1.ResourceAmounts{Memory: quantity("2Gi")},
				}
			},
			want: func(j *batchv1.Job) {
				c := &j.Spec.Template.Spec.Containers[0]
				c.Resources.Requests[corev1.ResourceCPU] = resource.MustParse("2")
				c.Resources.Limits[corev1.ResourceCPU] = resource.MustParse("2")
				c.Resources.Limits[corev1.ResourceMemory] = resource.MustParse("2Gi")
				setEnv(j, "GOMEMLIMIT", "1932735283")
				setEnv(j, "PERF_MAX_VUS", "2000") // the 2Gi cap (4096) no longer binds
			},
		},
		{
			name: "resources: a set limit below the default request lowers the request",
			exp: func(e *perfv1.PerfExperiment) {
				e.Spec.Load.K6.Resources = &perfv1.ResourcesSpec{Limits: &perfv1.ResourceAmounts{Memory: quantity("128Mi")}}
			},
			want: func(j *batchv1.Job) {
				c := &j.Spec.Template.Spec.Containers[0]
				c.Resources.Requests[corev1.ResourceMemory] = resource.MustParse("128Mi")
				c.Resources.Limits[corev1.ResourceMemory] = resource.MustParse("128Mi")
				setEnv(j, "GOMEMLIMIT", "120795955")
				setEnv(j, "PERF_PREALLOCATED_VUS", "256") // 128Mi/2/256Ki
				setEnv(j, "PERF_MAX_VUS", "256")
			},
		},
		{
			name: "preallocated VUs from the spec raise the default max",
			exp:  func(e *perfv1.PerfExperiment) { e.Spec.Load.K6.PreAllocatedVUs = ptr.To[int32](3000) },
			want: func(j *batchv1.Job) {
				setEnv(j, "PERF_PREALLOCATED_VUS", "3000")
				setEnv(j, "PERF_MAX_VUS", "3000")
			},
		},
		{
			name: "max VUs from the spec lower the default preallocation",
			exp:  func(e *perfv1.PerfExperiment) { e.Spec.Load.K6.MaxVUs = ptr.To[int32](20) },
			want: func(j *batchv1.Job) {
				setEnv(j, "PERF_PREALLOCATED_VUS", "20")
				setEnv(j, "PERF_MAX_VUS", "20")
			},
		},
		{
			name: "scriptRef mounts the user's key next to the scripts",
			exp:  func(e *perfv1.PerfExperiment) { withScriptRef(e) },
			want: func(j *batchv1.Job) {
				j.Spec.ActiveDeadlineSeconds = ptr.To[int64](1935 + 120) // the user's setup and teardown
				c := &j.Spec.Template.Spec.Containers[0]
				c.VolumeMounts = append(c.VolumeMounts, corev1.VolumeMount{Name: "user-script", MountPath: "/user-script", ReadOnly: true})
				j.Spec.Template.Spec.Volumes = append(j.Spec.Template.Spec.Volumes, corev1.Volume{
					Name: "user-script", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{
						LocalObjectReference: corev1.LocalObjectReference{Name: "my-load"},
						Items:                []corev1.KeyToPath{{Key: "load.js", Path: "load.js"}},
					}},
				})
			},
		},
		{
			name: "warm-up is named and labelled warmup",
			window: func(w *Window) {
				*w = Window{Stage: -1, Variant: perfv1.VariantWarmup, QPS: 500, Duration: 2 * time.Minute}
			},
			want: func(j *batchv1.Job) {
				j.Name = "profiling-overhead-warmup"
				for _, l := range []map[string]string{j.Labels, j.Spec.Template.Labels} {
					l[LabelStage], l[LabelVariant] = "warmup", "warmup"
				}
				j.Spec.ActiveDeadlineSeconds = ptr.To[int64](255)
				setEnv(j, "PERF_DURATION", "2m0s")
				setEnv(j, "PERF_WINDOW", "profiling-overhead-warmup")
			},
		},
		{
			name:   "no target labels, no anti-affinity",
			labels: map[string]string{},
			want:   func(j *batchv1.Job) { j.Spec.Template.Spec.Affinity = nil },
		},
		{
			name: "image",
			exp:  func(e *perfv1.PerfExperiment) { e.Spec.Load.K6.Image = "registry.local/k6:1.8.1" },
			want: func(j *batchv1.Job) { j.Spec.Template.Spec.Containers[0].Image = "registry.local/k6:1.8.1" },
		},
		{
			name: "env follows the operator's variables",
			exp: func(e *perfv1.PerfExperiment) {
				e.Spec.Load.K6.Env = []corev1.EnvVar{{Name: "K6_PROMETHEUS_RW_SERVER_URL", Value: "http://prometheus:9090/api/v1/write"},
					{Name: "TOKEN", ValueFrom: &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{
						LocalObjectReference: corev1.LocalObjectReference{Name: "k6"}, Key: "token"}}}}
			},
			want: func(j *batchv1.Job) {
				c := &j.Spec.Template.Spec.Containers[0]
				c.Env = append(c.Env, corev1.EnvVar{Name: "K6_PROMETHEUS_RW_SERVER_URL", Value: "http://prometheus:9090/api/v1/write"},
					corev1.EnvVar{Name: "TOKEN", ValueFrom: &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{
						LocalObjectReference: corev1.LocalObjectReference{Name: "k6"}, Key: "token"}}})
			},
		},
		{
			name: "extraArgs go before the script",
			exp: func(e *perfv1.PerfExperiment) {
				e.Spec.Load.K6.ExtraArgs = []string{"--out", "experimental-prometheus-rw"}
			},
			want: func(j *batchv1.Job) {
				c := &j.Spec.Template.Spec.Containers[0]
				script := c.Command[len(c.Command)-1]
				c.Command = append(c.Command[:len(c.Command)-1:len(c.Command)-1], "--out", "experimental-prometheus-rw", script)
			},
		},
		{
			name: "nodeSelector",
			exp:  func(e *perfv1.PerfExperiment) { e.Spec.Load.K6.NodeSelector = map[string]string{"pool": "load"} },
			want: func(j *batchv1.Job) { j.Spec.Template.Spec.NodeSelector = map[string]string{"pool": "load"} },
		},
		{
			name: "tolerations",
			exp: func(e *perfv1.PerfExperiment) {
				e.Spec.Load.K6.Tolerations = []corev1.Toleration{{Key: "load", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule}}
			},
			want: func(j *batchv1.Job) {
				j.Spec.Template.Spec.Tolerations = []corev1.Toleration{{Key: "load", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule}}
			},
		},
		{
			name: "affinity keeps the operator's anti-affinity beside the user's",
			exp: func(e *perfv1.PerfExperiment) {
				e.Spec.Load.K6.Affinity = &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{
					RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{
						MatchExpressions: []corev1.NodeSelectorRequirement{{Key: "pool", Operator: corev1.NodeSelectorOpIn, Values: []string{"load"}}},
					}}},
				}}
			},
			want: func(j *batchv1.Job) {
				j.Spec.Template.Spec.Affinity.NodeAffinity = &corev1.NodeAffinity{
					RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{
						MatchExpressions: []corev1.NodeSelectorRequirement{{Key: "pool", Operator: corev1.NodeSelectorOpIn, Values: []string{"load"}}},
					}}},
				}
			},
		},
		{
			name: "podLabels and podAnnotations, the operator's labels win",
			exp: func(e *perfv1.PerfExperiment) {
				e.Spec.Load.K6.PodLabels = map[string]string{"team": "shop", LabelVariant: "mine"}
				e.Spec.Load.K6.PodAnnotations = map[string]string{"sidecar.istio.io/inject": "false"}
			},
			want: func(j *batchv1.Job) {
				j.Spec.Template.Labels["team"] = "shop"
				j.Spec.Template.Annotations = map[string]string{"sidecar.istio.io/inject": "false"}
			},
		},
		{
			name: "imagePullSecrets",
			exp: func(e *perfv1.PerfExperiment) {
				e.Spec.Load.K6.ImagePullSecrets = []corev1.LocalObjectReference{{Name: "registry"}}
			},
			want: func(j *batchv1.Job) {
				j.Spec.Template.Spec.ImagePullSecrets = []corev1.LocalObjectReference{{Name: "registry"}}
			},
		},
		{
			name: "serviceAccountName leaves the token to the ServiceAccount",
			exp:  func(e *perfv1.PerfExperiment) { e.Spec.Load.K6.ServiceAccountName = "k6-runner" },
			want: func(j *batchv1.Job) {
				j.Spec.Template.Spec.ServiceAccountName = "k6-runner"
				j.Spec.Template.Spec.AutomountServiceAccountToken = nil
			},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			exp, w, lbls, want := testExperiment(), baseline1, targetLabels, baseJob()
			if tc.exp != nil {
				tc.exp(exp)
			}
			if tc.window != nil {
				tc.window(&w)
			}
			if tc.labels != nil {
				lbls = tc.labels
			}
			if tc.want != nil {
				tc.want(want)
			}
			got, err := BuildJob(exp, w, lbls)
			if err != nil {
				t.Fatal(err)
			}
			if !equality.Semantic.DeepEqual(got, want) {
				t.Errorf("unexpected Job (-want +got):\n%s", diff.Diff(want, got))
			}
		})
	}
}

func TestBuildJobRefuses(t *testing.T) {
	cases := []struct {
		name string
		exp  func(*perfv1.PerfExperiment)
		w    Window
	}{
		{"no QPS", nil, Window{Stage: 0, Variant: perfv1.VariantBaseline, Duration: time.Minute}},
		{"both QPS and VUs", nil, Window{Stage: 0, Variant: perfv1.VariantBaseline, QPS: 10, VUs: 2, Duration: time.Minute}},
		{"negative VUs", nil, Window{Stage: 0, Variant: perfv1.VariantBaseline, VUs: -2, Duration: time.Minute}},
		{"too short", nil, Window{Stage: 0, Variant: perfv1.VariantBaseline, QPS: 10, Duration: 500 * time.Millisecond}},
		{"not defaulted", func(e *perfv1.PerfExperiment) { e.Spec.Load.K6 = perfv1.K6Spec{} }, baseline1},
		{"bad timeout", func(e *perfv1.PerfExperiment) { e.Spec.Load.Timeout = "soon" }, baseline1},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			exp := testExperiment()
			if tc.exp != nil {
				tc.exp(exp)
			}
			if _, err := BuildJob(exp, tc.w, targetLabels); err == nil {
				t.Error("no error")
			}
		})
	}
}

// TestBuildJobClosedLoop checks a concurrency window's Job: no more pods than
// users, each pod's VUs exactly its share, and the window's users in PERF_VUS.
func TestBuildJobClosedLoop(t *testing.T) {
	for _, tc := range []struct {
		parallelism, vus, pods, perPod int32
	}{{1, 10, 1, 10}, {4, 2, 2, 1}, {3, 10, 3, 4}} {
		exp := testExperiment()
		exp.Spec.Load.K6.Parallelism = tc.parallelism
		job, err := BuildJob(exp, Window{Stage: 1, Variant: perfv1.VariantBaseline, VUs: tc.vus, Duration: time.Minute}, nil)
		if err != nil {
			t.Fatal(err)
		}
		if *job.Spec.Completions != tc.pods || *job.Spec.Parallelism != tc.pods {
			t.Errorf("%+v: %d completions, %d parallel, want %d pods", tc, *job.Spec.Completions, *job.Spec.Parallelism, tc.pods)
		}
		env := map[string]string{}
		for _, e := range job.Spec.Template.Spec.Containers[0].Env {
			env[e.Name] = e.Value
		}
		want := map[string]string{EnvQPS: "0", EnvVUs: fmt.Sprint(tc.vus), EnvPods: fmt.Sprint(tc.pods),
			EnvPreAllocatedVUs: fmt.Sprint(tc.perPod), EnvMaxVUs: fmt.Sprint(tc.perPod)}
		for k, v := range want {
			if env[k] != v {
				t.Errorf("%+v: %s=%q, want %q", tc, k, env[k], v)
			}
		}
	}
}

// TestBuildJobDoesNotAliasLabels guards the caller's maps: the reconciler may
// reuse the target's labels, and the Job's pod labels must not change its own.
func TestBuildJobDoesNotAliasLabels(t *testing.T) {
	lbls := map[string]string{"app": "mall-gateway"}
	job, err := BuildJob(testExperiment(), baseline1, lbls)
	if err != nil {
		t.Fatal(err)
	}
	job.Spec.Template.Labels["extra"] = "x"
	job.Spec.Template.Spec.Affinity.PodAntiAffinity.PreferredDuringSchedulingIgnoredDuringExecution[0].PodAffinityTerm.LabelSelector.MatchLabels["extra"] = "x"
	if len(lbls) != 1 || len(job.Labels) != 4 {
		t.Errorf("labels are shared: target %v, job %v", lbls, job.Labels)
	}
}
