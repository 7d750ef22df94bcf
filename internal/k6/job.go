package k6

import (
	"fmt"
	"math"
	"strconv"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	perfv1 "perfexp.dev/perf-operator/api/v1alpha1"
)

// The environment run.js reads. The Job sets all but EnvCompletionIndex, which
// Kubernetes sets in every pod of an Indexed Job, and EnvSummaryPath and
// EnvSummaryLimit, which only tests change.
const (
	EnvQPS             = "PERF_QPS"              // the whole window's arrival rate (0 for closed-loop load)
	EnvVUs             = "PERF_VUS"              // the whole window's closed-loop virtual users (0 for an arrival rate)
	EnvPods            = "PERF_PODS"             // the window's k6 pods; each runs its share of EnvQPS
	EnvDuration        = "PERF_DURATION"         // how long the load runs, as a Go duration
	EnvPreAllocatedVUs = "PERF_PREALLOCATED_VUS" // per pod
	EnvMaxVUs          = "PERF_MAX_VUS"          // per pod
	EnvWindow          = "PERF_WINDOW"           // the Job's name, echoed in the summary
	EnvSummaryPath     = "PERF_SUMMARY_PATH"     // where the JSON summary goes; default TerminationMessagePath
	EnvSummaryLimit    = "PERF_SUMMARY_LIMIT"    // its size limit in bytes; default 4096
	EnvCompletionIndex = "JOB_COMPLETION_INDEX"  // the pod's index, 0 … pods-1
)

// ContainerName is the k6 container's name. Its termination message
// (status.containerStatuses[name=k6].state.terminated.message) holds the pod's
// summary; ParseResult reads it.
const ContainerName = "k6"

// TerminationMessagePath is where run.js writes its summary in a pod.
const TerminationMessagePath = "/dev/termination-log"

const (
	scriptsDir    = "/scripts"
	userScriptDir = "user-script" // mounted at /user-script, next to /scripts
	tmpDir        = "/tmp"
	// runAsID is the k6 image's own user and group.
	runAsID int64 = 12345
	// startupGrace is the Job's allowance, beyond the load and its graceful stop,
	// for scheduling, pulling the image, initializing VUs and writing the summary.
	startupGrace = 2 * time.Minute
	// userHooksGrace covers a user script's setup and teardown (k6's default
	// timeouts of 60 s each).
	userHooksGrace = 2 * time.Minute
)

// The default k6 container resources: one k6 pod holds a few thousand requests per
// second within a CPU. Its memory holds the VUs and every timing sample k6 keeps
// for its end-of-test summary: eight trends of 8 bytes per request, up to twice
// that while their slices grow (measured: ~125 bytes per request). 512Mi is then
// enough for about 3 million requests per pod and window, such as 1,500 req/s for
// 30 minutes; beyond that, raise the parallelism or the memory.
var (
	defaultCPURequest    = resource.MustParse("500m")
	defaultMemoryRequest = resource.MustParse("256Mi")
	defaultCPULimit      = resource.MustParse("1")
	defaultMemoryLimit   = resource.MustParse("512Mi")
)

// BuildJob returns the k6 Job of one window. exp must be defaulted. The Job runs
// min(parallelism, QPS or VUs) pods as an Indexed Job whose pods split the rate
// (or the virtual users) exactly,
// prefers nodes without the target's pods (targetPodLabels; nil to skip), and is
// never retried: a second attempt would load the window twice. Owner references
// are left to the caller.
func BuildJob(exp *perfv1.PerfExperiment, w Window, targetPodLabels map[string]string) (*batchv1.Job, error) {
	if exp.Name == "" {
		return nil, fmt.Errorf("the experiment has no name")
	}
	if (w.QPS > 0) == (w.VUs > 0) || w.QPS < 0 || w.VUs < 0 {
		return nil, fmt.Errorf("window has QPS %d and VUs %d: exactly one must be at least 1", w.QPS, w.VUs)
	}
	if w.Duration < time.Second {
		return nil, fmt.Errorf("window duration %s is shorter than 1s", w.Duration)
	}
	timeout, err := exp.Spec.Load.Timeout.Parse()
	if err != nil {
		return nil, fmt.Errorf("spec.load.timeout: %w", err)
	}
	k6 := &exp.Spec.Load.K6
	if k6.Image == "" || k6.Parallelism < 1 {
		return nil, fmt.Errorf("spec.load.k6 has no image or parallelism: call Default() on the experiment first")
	}
	pods := w.Pods(k6.Parallelism)
	deadline := w.Duration + timeout + gracefulStopMargin + startupGrace
	if exp.Spec.Load.ScriptRef != nil {
		deadline += userHooksGrace
	}
	name := JobName(exp.Name, w)
	lbls := labels(exp.Name, w)
	return &batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: exp.Namespace, Labels: lbls},
		Spec: batchv1.JobSpec{
			Parallelism:           ptr.To(pods),
			Completions:           ptr.To(pods),
			CompletionMode:        ptr.To(batchv1.IndexedCompletion),
			BackoffLimit:          ptr.To[int32](0),
			ActiveDeadlineSeconds: ptr.To(int64(math.Ceil(deadline.Seconds()))),
			Template:              podTemplate(exp, w, name, pods, lbls, targetPodLabels),
		},
	}, nil
}

// podTemplate is the window's pod: the operator's settings, with the user's
// spec.load.k6 pod settings added where they cannot change what is measured
// (the operator's labels, environment and flags win; validation refuses
// overriding them).
func podTemplate(exp *perfv1.PerfExperiment, w Window, name string, pods int32, lbls, targetPodLabels map[string]string) corev1.PodTemplateSpec {
	k6 := &exp.Spec.Load.K6
	podLabels := copyLabels(k6.PodLabels)
	for k, v := range lbls {
		podLabels[k] = v
	}
	var annotations map[string]string
	if len(k6.PodAnnotations) > 0 {
		annotations = copyLabels(k6.PodAnnotations)
	}
	var nodeSelector map[string]string
	if len(k6.NodeSelector) > 0 {
		nodeSelector = copyLabels(k6.NodeSelector)
	}
	// The pods need no API access; a ServiceAccount the user names (for an
	// output's cloud credentials) decides for itself whether its token is
	// mounted.
	automount := ptr.To(false)
	if k6.ServiceAccountName != "" {
		automount = nil
	}
	return corev1.PodTemplateSpec{
		ObjectMeta: metav1.ObjectMeta{Labels: podLabels, Annotations: annotations},
		Spec: corev1.PodSpec{
			RestartPolicy:                corev1.RestartPolicyNever,
			ServiceAccountName:           k6.ServiceAccountName,
			AutomountServiceAccountToken: automount,
			EnableServiceLinks:           ptr.To(false),
			SecurityContext:              podSecurityContext(),
			NodeSelector:                 nodeSelector,
			Tolerations:                  deepCopyTolerations(k6.Tolerations),
			ImagePullSecrets:             append([]corev1.LocalObjectReference(nil), k6.ImagePullSecrets...),
			Affinity:                     affinity(k6.Affinity, targetPodLabels),
			Containers:                   []corev1.Container{container(exp, w, name, pods)},
			Volumes:                      volumes(exp),
		},
	}
}

// affinity is the user's affinity with the operator's preference for nodes
// without the target's pods added to its pod anti-affinity.
func affinity(user *corev1.Affinity, targetPodLabels map[string]string) *corev1.Affinity {
	away := awayFrom(targetPodLabels)
	if user == nil {
		return away
	}
	out := user.DeepCopy()
	if away == nil {
		return out
	}
	if out.PodAntiAffinity == nil {
		out.PodAntiAffinity = &corev1.PodAntiAffinity{}
	}
	out.PodAntiAffinity.PreferredDuringSchedulingIgnoredDuringExecution = append(out.PodAntiAffinity.PreferredDuringSchedulingIgnoredDuringExecution,
		away.PodAntiAffinity.PreferredDuringSchedulingIgnoredDuringExecution...)
	return out
}

func deepCopyTolerations(in []corev1.Toleration) []corev1.Toleration {
	if len(in) == 0 {
		return nil
	}
	out := make([]corev1.Toleration, len(in))
	for i := range in {
		in[i].DeepCopyInto(&out[i])
	}
	return out
}

// container is the k6 container of a window's pods.
func container(exp *perfv1.PerfExperiment, w Window, name string, pods int32) corev1.Container {
	k6 := &exp.Spec.Load.K6
	res := resources(k6.Resources)
	preVUs, maxVUs := virtualUsers(k6, ceilDiv(w.QPS, pods), res.Limits.Memory())
	if w.VUs > 0 { // closed loop: each pod runs exactly its share of the users
		preVUs, maxVUs = ceilDiv(w.VUs, pods), ceilDiv(w.VUs, pods)
	}
	return corev1.Container{
		Name:                     ContainerName,
		Image:                    k6.Image,
		ImagePullPolicy:          corev1.PullIfNotPresent,
		Command:                  Command(scriptsDir+"/"+ScriptKey, k6.ExtraArgs...),
		Env:                      append(env(w, name, pods, preVUs, maxVUs, res.Limits.Memory()), deepCopyEnv(k6.Env)...),
		Ports:                    []corev1.ContainerPort{{Name: APIPortName, ContainerPort: APIPort, Protocol: corev1.ProtocolTCP}},
		Resources:                res,
		VolumeMounts:             volumeMounts(exp),
		SecurityContext:          containerSecurityContext(),
		TerminationMessagePath:   TerminationMessagePath,
		TerminationMessagePolicy: corev1.TerminationMessageReadFile,
	}
}

// Command is the k6 command line that runs a script: quietly (no progress bar in
// the log), with the REST API on the pod's IP at APIPort (the operator reads the
// live counters there on every sample, see ReadLive), without the anonymous
// usage report (nothing is sent anywhere), with the environment visible to the
// script, and the user's extra flags (spec.load.k6.extraArgs, such as --out)
// before the script.
func Command(script string, extra ...string) []string {
	cmd := []string{"k6", "run", "--quiet", fmt.Sprintf("--address=0.0.0.0:%d", APIPort), "--no-usage-report", "--include-system-env-vars"}
	cmd = append(cmd, extra...)
	return append(cmd, script)
}

func deepCopyEnv(in []corev1.EnvVar) []corev1.EnvVar {
	out := make([]corev1.EnvVar, len(in))
	for i := range in {
		in[i].DeepCopyInto(&out[i])
	}
	return out
}

func env(w Window, name string, pods, preVUs, maxVUs int32, memoryLimit *resource.Quantity) []corev1.EnvVar {
	vars := []corev1.EnvVar{
		{Name: EnvQPS, Value: strconv.Itoa(int(w.QPS))},
		{Name: EnvPods, Value: strconv.Itoa(int(pods))},
		{Name: EnvDuration, Value: w.Duration.String()},
		{Name: EnvPreAllocatedVUs, Value: strconv.Itoa(int(preVUs))},
		{Name: EnvMaxVUs, Value: strconv.Itoa(int(maxVUs))},
		{Name: EnvWindow, Value: name},
		// k6 v1 may fetch a k6 build with the extensions a script imports; the
		// operator's scripts need none, and a pod must download nothing.
		{Name: "K6_AUTO_EXTENSION_RESOLUTION", Value: "false"},
		{Name: "K6_NO_USAGE_REPORT", Value: "true"},
	}
	if w.VUs > 0 {
		vars = append(vars, corev1.EnvVar{Name: EnvVUs, Value: strconv.Itoa(int(w.VUs))})
	}
	if !memoryLimit.IsZero() {
		// Keep Go's heap under the limit, so k6 collects garbage before the kernel
		// kills it: without it, the heap grows to twice the live data.
		vars = append(vars, corev1.EnvVar{Name: "GOMEMLIMIT", Value: strconv.FormatInt(memoryLimit.Value()*9/10, 10)})
	}
	return vars
}

// virtualUsers returns each pod's preallocated and maximum VUs. Unless the spec
// sets them: one second of latency budget at the pod's rate (Little's law: the
// VUs an arrival rate needs are its rate times the latency), at least 10; and four
// times that, at least 100, for a target that slows down. The defaults are capped
// at what half the memory limit holds at about 256 KiB per VU (measured: ~190 KiB
// live with run.js's histogram counters), leaving the rest to k6's latency
// samples. A pod short of VUs drops iterations, which flags its window, so the cap
// can only make a window fail visibly, never mislead.
func virtualUsers(spec *perfv1.K6Spec, ratePerPod int32, memoryLimit *resource.Quantity) (pre, maxVUs int32) {
	const bytesPerVU = 256 << 10
	capVUs := int32(math.MaxInt32)
	if !memoryLimit.IsZero() {
		capVUs = int32(min(memoryLimit.Value()/2/bytesPerVU, math.MaxInt32))
		capVUs = max(capVUs, 10)
	}
	pre = min(max(10, ratePerPod), capVUs)
	maxVUs = min(max(4*pre, 100), capVUs)
	if spec.PreAllocatedVUs != nil {
		pre = *spec.PreAllocatedVUs
	}
	if spec.MaxVUs != nil {
		maxVUs = *spec.MaxVUs
	}
	// k6 refuses maxVUs below preAllocatedVUs; whichever the spec set wins.
	if pre > maxVUs {
		if spec.PreAllocatedVUs != nil && spec.MaxVUs == nil {
			maxVUs = pre
		} else {
			pre = maxVUs
		}
	}
	return pre, maxVUs
}

// resources applies the default to every amount the spec leaves out, then keeps
// each request within its limit: a defaulted amount yields to a set one.
func resources(spec *perfv1.ResourcesSpec) corev1.ResourceRequirements {
	var req, lim perfv1.ResourceAmounts
	if spec != nil && spec.Requests != nil {
		req = *spec.Requests
	}
	if spec != nil && spec.Limits != nil {
		lim = *spec.Limits
	}
	cpuReq, cpuLim := amounts(req.CPU, lim.CPU, defaultCPURequest, defaultCPULimit)
	memReq, memLim := amounts(req.Memory, lim.Memory, defaultMemoryRequest, defaultMemoryLimit)
	return corev1.ResourceRequirements{
		Requests: corev1.ResourceList{corev1.ResourceCPU: cpuReq, corev1.ResourceMemory: memReq},
		Limits:   corev1.ResourceList{corev1.ResourceCPU: cpuLim, corev1.ResourceMemory: memLim},
	}
}

func amounts(req, lim *resource.Quantity, defReq, defLim resource.Quantity) (resource.Quantity, resource.Quantity) {
	switch {
	case req != nil && lim != nil:
		return req.DeepCopy(), lim.DeepCopy()
	case req != nil:
		if req.Cmp(defLim) > 0 {
			return req.DeepCopy(), req.DeepCopy()
		}
		return req.DeepCopy(), defLim.DeepCopy()
	case lim != nil:
		if lim.Cmp(defReq) < 0 {
			return lim.DeepCopy(), lim.DeepCopy()
		}
		return defReq.DeepCopy(), lim.DeepCopy()
	}
	return defReq.DeepCopy(), defLim.DeepCopy()
}

func podSecurityContext() *corev1.PodSecurityContext {
	return &corev1.PodSecurityContext{
		RunAsNonRoot:   ptr.To(true),
		RunAsUser:      ptr.To(runAsID),
		RunAsGroup:     ptr.To(runAsID),
		FSGroup:        ptr.To(runAsID),
		SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
	}
}

func containerSecurityContext() *corev1.SecurityContext {
	return &corev1.SecurityContext{
		ReadOnlyRootFilesystem:   ptr.To(true),
		AllowPrivilegeEscalation: ptr.To(false),
		Capabilities:             &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
	}
}

// awayFrom prefers nodes that run none of the target's pods, so k6 does not take
// the target's CPU. Preferred, not required: on a one-node cluster the load must
// still run. No labels, no affinity: an empty selector would match every pod.
func awayFrom(targetPodLabels map[string]string) *corev1.Affinity {
	if len(targetPodLabels) == 0 {
		return nil
	}
	return &corev1.Affinity{PodAntiAffinity: &corev1.PodAntiAffinity{
		PreferredDuringSchedulingIgnoredDuringExecution: []corev1.WeightedPodAffinityTerm{{
			Weight: 100,
			PodAffinityTerm: corev1.PodAffinityTerm{
				LabelSelector: &metav1.LabelSelector{MatchLabels: copyLabels(targetPodLabels)},
				TopologyKey:   corev1.LabelHostname,
			},
		}},
	}}
}

func volumeMounts(exp *perfv1.PerfExperiment) []corev1.VolumeMount {
	mounts := []corev1.VolumeMount{
		{Name: "scripts", MountPath: scriptsDir, ReadOnly: true},
		{Name: "tmp", MountPath: tmpDir},
	}
	if exp.Spec.Load.ScriptRef != nil {
		mounts = append(mounts, corev1.VolumeMount{Name: userScriptDir, MountPath: "/" + userScriptDir, ReadOnly: true})
	}
	return mounts
}

// volumes are the operator's script, the user's script (only its key) when there
// is one, and a writable /tmp on the read-only root filesystem.
func volumes(exp *perfv1.PerfExperiment) []corev1.Volume {
	vols := []corev1.Volume{
		{Name: "scripts", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{
			LocalObjectReference: corev1.LocalObjectReference{Name: ScriptConfigMapName(exp.Name)},
		}}},
		{Name: "tmp", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}},
	}
	if ref := exp.Spec.Load.ScriptRef; ref != nil {
		vols = append(vols, corev1.Volume{Name: userScriptDir, VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{
			LocalObjectReference: corev1.LocalObjectReference{Name: ref.Name},
			Items:                []corev1.KeyToPath{{Key: ref.Key, Path: ref.Key}},
		}}})
	}
	return vols
}

func copyLabels(in map[string]string) map[string]string {
	out := make(map[string]string, len(in))
	for k, v := range in {
		out[k] = v
	}
	return out
}

func ceilDiv(a, b int32) int32 {
	return (a + b - 1) / b
}
