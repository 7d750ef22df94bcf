package v1alpha1

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Validation notes for the whole file:
//   - every string has a MaxLength and every list a MaxItems: the apiserver estimates
//     the cost of each CEL rule from these bounds and refuses a CRD without them;
//   - CEL rules that parse a value (duration(), quantity()) first check its format
//     with matches(), so a malformed value yields one clear message, not an
//     evaluation error;
//   - messages name what is allowed; the apiserver prefixes them with the field path.

// Duration is a Go duration string such as "30s", "5m" or "1h30m".
//
// +kubebuilder:validation:MaxLength=32
// +kubebuilder:validation:XValidation:rule="self.matches('^([0-9]{1,6}([.][0-9]+)?(ns|us|ms|s|m|h))+$')",message="must be a duration such as 30s, 5m or 1h30m (units: ns, us, ms, s, m, h; at most 6 digits a number, so it cannot overflow)"
type Duration string

// Percent is a percentage from 0% to 100%, such as "5%" or "2.5%".
//
// +kubebuilder:validation:MaxLength=12
// +kubebuilder:validation:XValidation:rule="self.matches('^(100([.]0+)?|[0-9]{1,2}([.][0-9]+)?)%$')",message="must be a percentage from 0% to 100%, such as 5% or 2.5%"
type Percent string

// PerfExperimentSpec is the plan of an experiment: what to load, at which rates, what
// to switch, what to watch and when to stop. Once the experiment has started, only
// spec.abort may change.
//
// +kubebuilder:validation:XValidation:rule="has(self.load.scriptRef) || has(self.target.url)",fieldPath=".target.url",reason="FieldValueRequired",message="target.url is required when load.requests generates the k6 script (it is the base URL the requests go to)"
// +kubebuilder:validation:XValidation:rule="self.metrics.source != 'prometheus' || has(self.metrics.prometheus)",fieldPath=".metrics.prometheus",reason="FieldValueRequired",message="metrics.prometheus.url is required when metrics.source is prometheus"
// +kubebuilder:validation:XValidation:rule="(has(self.abort) && self.abort) || !self.windows.baseline.matches('^([0-9]{1,6}([.][0-9]+)?(ns|us|ms|s|m|h))+$') || !self.metrics.interval.matches('^([0-9]{1,6}([.][0-9]+)?(ns|us|ms|s|m|h))+$') || duration(self.metrics.interval) < duration('1s') || duration(self.metrics.interval) > duration('5m') || (duration(self.windows.baseline).getMilliseconds() >= 4 * duration(self.metrics.interval).getMilliseconds() && (!has(self.metrics.prometheus) || (has(self.metrics.source) && self.metrics.source == 'metrics-server') || duration(self.windows.baseline).getMilliseconds() >= (duration(self.metrics.interval).getMilliseconds() > 60000 ? (duration(self.metrics.interval).getMilliseconds() + 999) / 1000 * 1000 : 60000) + ((has(self.design) && self.design == 'interleaved') ? 2 : ((has(self.toggle) || has(self.variants) || (has(self.calibrate) && self.calibrate)) ? 6 : 3)) * duration(self.metrics.interval).getMilliseconds()))",fieldPath=".windows.baseline",message="must be at least 4 metrics.interval long and, with Prometheus (metrics.prometheus set, source not metrics-server), at least the CPU rate's range (metrics.interval, at least 1m) plus 6 intervals (2 for an interleaved round's sub-window, 3 for a load-only sweep): a sample counts only once the range its CPU averages over lies inside the window after its first interval, and the analysis needs 4 of them"
// +kubebuilder:validation:XValidation:rule="(has(self.abort) && self.abort) || !self.windows.treatment.matches('^([0-9]{1,6}([.][0-9]+)?(ns|us|ms|s|m|h))+$') || !self.metrics.interval.matches('^([0-9]{1,6}([.][0-9]+)?(ns|us|ms|s|m|h))+$') || duration(self.metrics.interval) < duration('1s') || duration(self.metrics.interval) > duration('5m') || (duration(self.windows.treatment).getMilliseconds() >= 4 * duration(self.metrics.interval).getMilliseconds() && (!has(self.metrics.prometheus) || (has(self.metrics.source) && self.metrics.source == 'metrics-server') || duration(self.windows.treatment).getMilliseconds() >= (duration(self.metrics.interval).getMilliseconds() > 60000 ? (duration(self.metrics.interval).getMilliseconds() + 999) / 1000 * 1000 : 60000) + ((has(self.design) && self.design == 'interleaved') ? 2 : ((has(self.toggle) || has(self.variants) || (has(self.calibrate) && self.calibrate)) ? 6 : 3)) * duration(self.metrics.interval).getMilliseconds()))",fieldPath=".windows.treatment",message="must be at least 4 metrics.interval long and, with Prometheus (metrics.prometheus set, source not metrics-server), at least the CPU rate's range (metrics.interval, at least 1m) plus 6 intervals (2 for an interleaved round's sub-window, 3 for a load-only sweep): a sample counts only once the range its CPU averages over lies inside the window after its first interval, and the analysis needs 4 of them"
// +kubebuilder:validation:XValidation:rule="!has(self.toggle) || !has(self.variants)",fieldPath=".variants",message="set either toggle (one change against the baseline) or variants (several), not both"
// +kubebuilder:validation:XValidation:rule="!has(self.design) || self.design != 'interleaved' || has(self.variants) || (has(self.toggle) && (has(self.toggle.http) || has(self.toggle.exec)))",fieldPath=".design",message="interleaved switches the toggle several times under one continuous load, so it needs a runtime toggle (http or exec); env, jvmOption and args roll the pods: use design sequential"
// +kubebuilder:validation:XValidation:rule="!has(self.variants) || !has(self.design) || self.design != 'interleaved'",fieldPath=".design",message="variants run one after the other against one baseline: use design sequential"
// +kubebuilder:validation:XValidation:rule="has(self.toggle) || !has(self.calibrate) || !self.calibrate",fieldPath=".calibrate",message="an A/A calibration measures one toggle's two arms: set toggle (not variants), or drop calibrate"
// +kubebuilder:validation:XValidation:rule="has(self.toggle) || has(self.variants) || !has(self.successCriteria)",fieldPath=".successCriteria",message="success criteria are a toggle's overheads: set toggle or variants, or drop successCriteria for a load-only sweep"
// +kubebuilder:validation:XValidation:rule="!has(self.interleaving) || (has(self.design) && self.design == 'interleaved')",fieldPath=".interleaving",message="is only used with design interleaved"
type PerfExperimentSpec struct {
	// Target is the Deployment under test, in the experiment's own namespace.
	// +required
	Target TargetSpec `json:"target"`

	// Load describes the k6 load sent to the target: generated weighted requests or
	// a user script from a ConfigMap, always at a constant arrival rate.
	// +required
	Load LoadSpec `json:"load"`

	// Warmup runs load before the first stage so caches, JIT and connection pools
	// settle. It is excluded from the results. Omit it to start measuring at once.
	// +optional
	Warmup *WarmupSpec `json:"warmup,omitempty"`

	// Stages are the load levels, run in order. Each stage measures a baseline
	// window, applies the toggle, settles, measures a treatment window and reverts;
	// without a toggle each stage is measured once. A list of several levels is
	// a sweep: open-loop arrival rates (qps) or closed-loop virtual users
	// (concurrency), and status.curve and status.knee say where the target
	// stopped keeping up.
	// +required
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=20
	// +listType=atomic
	Stages []StageSpec `json:"stages"`

	// Windows are the lengths of the measured and settle windows of every stage.
	// +optional
	// +kubebuilder:default={}
	Windows WindowsSpec `json:"windows,omitempty"`

	// Design lays out each stage's measured windows. sequential (the default,
	// and the only design for toggles that roll the pods) measures one baseline
	// window, switches the toggle on, settles, measures one treatment window and
	// switches it off. interleaved (runtime toggles: http, exec) keeps one
	// continuous load per stage and alternates short baseline and treatment
	// sub-windows in rounds (spec.interleaving), each after a settle period; the
	// analysis pairs the two sub-windows of a round, so slow drift (a cache
	// warming, a neighbour's batch job) cancels instead of reading as overhead.
	// Windows.baseline and windows.treatment are then each sub-window's length.
	// +optional
	// +kubebuilder:default=sequential
	Design Design `json:"design,omitempty"`

	// Interleaving tunes design interleaved.
	// +optional
	Interleaving *InterleavingSpec `json:"interleaving,omitempty"`

	// Calibrate runs the design as an A/A test: every step happens as in a
	// real run, but the toggle is never switched (both arms are baseline).
	// The summary then shows the noise floor per metric (the minimum
	// detectable effect) and whether the noise alone looked significant; the
	// toggle is still validated and the target still locked.
	// +optional
	Calibrate bool `json:"calibrate,omitempty"`

	// Toggle is the change whose cost is measured. Exactly one kind is set.
	// Omit it for a load-only sweep: each stage is measured once, nothing on
	// the target is changed, and the result is status.curve and status.knee.
	// +optional
	Toggle *ToggleSpec `json:"toggle,omitempty"`

	// Variants compare several toggles with one baseline: at every stage the
	// baseline is measured once, then each variant in turn is applied,
	// measured and reverted (a variant that rolls the pods is rolled out and
	// back before the next one), so each is compared with the same baseline.
	// The confidence intervals are widened for the number of variants
	// (Bonferroni), so the run's 95 % holds for all comparisons together.
	// Every variant must change the same thing (the same toggle kind, the same
	// variable for env), so one original-state record restores any of them.
	// Set either toggle or variants.
	// +optional
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=5
	// +listType=map
	// +listMapKey=name
	// +kubebuilder:validation:XValidation:rule="self.all(v, [has(v.toggle.env), has(v.toggle.jvmOption), has(v.toggle.args), has(v.toggle.http), has(v.toggle.exec)] == [has(self[0].toggle.env), has(self[0].toggle.jvmOption), has(self[0].toggle.args), has(self[0].toggle.http), has(self[0].toggle.exec)])",message="every variant must use the same toggle kind, so that one original-state record restores any of them; compare different kinds in separate experiments"
	// +kubebuilder:validation:XValidation:rule="self.size() == 0 || !has(self[0].toggle.env) || self.all(v, v.toggle.env.name == self[0].toggle.env.name)",message="every env variant must set the same variable, so that one original-state record restores any of them"
	Variants []ArmSpec `json:"variants,omitempty"`

	// Knee says when a stage of a sweep counts as past the target's capacity.
	// +optional
	// +kubebuilder:default={}
	Knee KneeSpec `json:"knee,omitempty"`

	// Metrics says where CPU, memory and heap samples come from.
	// +optional
	// +kubebuilder:default={}
	Metrics MetricsSpec `json:"metrics,omitempty"`

	// Guardrails abort the experiment and revert the toggle when the target is in
	// danger. They are evaluated on every sample from the first toggle on.
	// +optional
	// +kubebuilder:default={}
	Guardrails GuardrailsSpec `json:"guardrails,omitempty"`

	// SuccessCriteria are the overheads the toggle may cost. When set, the
	// experiment's Passed condition says whether every stage stayed within them.
	// +optional
	SuccessCriteria *SuccessCriteria `json:"successCriteria,omitempty"`

	// Cleanup says what is kept when the experiment ends. The toggle is always
	// reverted and the target lock always released.
	// +optional
	// +kubebuilder:default={}
	Cleanup CleanupSpec `json:"cleanup,omitempty"`

	// Abort stops the experiment at once: the load stops, the toggle is reverted and
	// the experiment ends Aborted. It is the only field that may change once the
	// experiment has started.
	// +optional
	Abort bool `json:"abort,omitempty"`
}

// Design is how a stage's windows are laid out.
// +kubebuilder:validation:Enum=sequential;interleaved
type Design string

// The designs.
const (
	DesignSequential  Design = "sequential"
	DesignInterleaved Design = "interleaved"
)

// Order is the order of the two sub-windows in the rounds of an interleaved stage.
// +kubebuilder:validation:Enum=abba;random
type Order string

// The orders.
const (
	// OrderABBA alternates: AB, BA, AB, … (or BA, AB, … by the seed), so a
	// linear drift cancels over every two rounds.
	OrderABBA Order = "abba"
	// OrderRandom draws each round's order from the seed.
	OrderRandom Order = "random"
)

// InterleavingSpec tunes design interleaved.
type InterleavingSpec struct {
	// Rounds per stage; each round measures one baseline and one treatment
	// sub-window. The interval comes from the rounds: more rounds, a narrower
	// interval (kubectl perf plan says how many an effect needs).
	// +optional
	// +kubebuilder:default=4
	// +kubebuilder:validation:Minimum=2
	// +kubebuilder:validation:Maximum=50
	Rounds int32 `json:"rounds,omitempty"`

	// Order of the sub-windows within the rounds.
	// +optional
	// +kubebuilder:default=abba
	Order Order `json:"order,omitempty"`

	// Seed draws the orders; unset, one is derived from the experiment's UID.
	// The seed used and every round's order are recorded in
	// status.interleaving.
	// +optional
	Seed *int64 `json:"seed,omitempty"`
}

// TargetSpec names the Deployment under test.
type TargetSpec struct {
	// Deployment is the name of the target Deployment in the experiment's namespace.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:XValidation:rule="self.matches('^[a-z0-9]([-a-z0-9]*[a-z0-9])?([.][a-z0-9]([-a-z0-9]*[a-z0-9])?)*$')",message="must be a Deployment name in the experiment's namespace (lower-case DNS subdomain, no namespace prefix)"
	Deployment string `json:"deployment"`

	// Container is the container the toggle changes and whose resources are
	// measured. Defaults to the first container of the pod template.
	// +optional
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:XValidation:rule="self.matches('^[a-z0-9]([-a-z0-9]*[a-z0-9])?$')",message="must be a container name (lower-case DNS label)"
	Container string `json:"container,omitempty"`

	// URL is the base URL the generated load requests go to, usually the target's
	// Service, such as http://mall-gateway.shop.svc:8080. Required with
	// load.requests.
	// +optional
	// +kubebuilder:validation:MaxLength=2048
	// +kubebuilder:validation:XValidation:rule="self.matches('^https?://[^/?#[:space:]]+(/[^?#[:space:]]*)?$')",message="must be an absolute http:// or https:// URL without query or fragment, such as http://app.shop.svc:8080"
	URL string `json:"url,omitempty"`
}

// LoadSpec describes the load generator.
//
// +kubebuilder:validation:XValidation:rule="has(self.requests) != has(self.scriptRef)",message="set exactly one of load.requests (a generated k6 script) or load.scriptRef (your own k6 script in a ConfigMap)"
type LoadSpec struct {
	// Requests are the weighted requests of the generated k6 script; each
	// iteration picks one at random in proportion to its weight.
	// +optional
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=50
	// +listType=atomic
	Requests []RequestSpec `json:"requests,omitempty"`

	// ScriptRef points to a ConfigMap key holding a k6 script of your own. The
	// operator still sets the arrival rate: the script's default function is run by
	// a constant-arrival-rate scenario the operator defines.
	// +optional
	ScriptRef *ScriptRef `json:"scriptRef,omitempty"`

	// Timeout is the per-request timeout of the load generator.
	// +optional
	// +kubebuilder:default="10s"
	// +kubebuilder:validation:XValidation:rule="!self.matches('^([0-9]{1,6}([.][0-9]+)?(ns|us|ms|s|m|h))+$') || (duration(self) >= duration('100ms') && duration(self) <= duration('5m'))",message="must be between 100ms and 5m"
	Timeout Duration `json:"timeout,omitempty"`

	// K6 configures the k6 load Jobs.
	// +optional
	// +kubebuilder:default={}
	K6 K6Spec `json:"k6,omitempty"`
}

// RequestSpec is one request of the generated load script.
type RequestSpec struct {
	// Method is the HTTP method.
	// +optional
	// +kubebuilder:default=GET
	// +kubebuilder:validation:Enum=GET;POST;PUT;PATCH;DELETE;HEAD
	Method string `json:"method,omitempty"`

	// Path is appended to target.url; it starts with a slash and may carry a query.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=2048
	// +kubebuilder:validation:XValidation:rule="self.startsWith('/')",message="must start with /, such as /api/v1/items"
	Path string `json:"path"`

	// Weight is the request's share of iterations relative to the other requests.
	// +optional
	// +kubebuilder:default=1
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=1000
	Weight int32 `json:"weight,omitempty"`

	// Body is sent with POST, PUT and PATCH requests.
	// +optional
	// +kubebuilder:validation:MaxLength=4096
	Body string `json:"body,omitempty"`

	// Headers are added to the request.
	// +optional
	// +kubebuilder:validation:MaxItems=16
	// +listType=atomic
	Headers []HTTPHeader `json:"headers,omitempty"`
}

// HTTPHeader is one HTTP request header.
type HTTPHeader struct {
	// Name of the header, such as X-Request-Source.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=256
	// +kubebuilder:validation:XValidation:rule="self.matches('^[-!#$%&*+.^_`|~0-9A-Za-z]+$')",message="must be an HTTP header name (letters, digits and !#$%&*+-.^_`|~)"
	Name string `json:"name"`

	// Value of the header.
	// +required
	// +kubebuilder:validation:MaxLength=1024
	Value string `json:"value"`
}

// ScriptRef selects a k6 script in a ConfigMap of the experiment's namespace.
type ScriptRef struct {
	// Name of the ConfigMap.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:XValidation:rule="self.matches('^[a-z0-9]([-a-z0-9]*[a-z0-9])?([.][a-z0-9]([-a-z0-9]*[a-z0-9])?)*$')",message="must be a ConfigMap name (lower-case DNS subdomain)"
	Name string `json:"name"`

	// Key of the script in the ConfigMap.
	// +optional
	// +kubebuilder:default="script.js"
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:XValidation:rule="self.matches('^[-._a-zA-Z0-9]+$')",message="must be a ConfigMap key (letters, digits, '-', '_' and '.')"
	Key string `json:"key,omitempty"`
}

// K6Spec configures the k6 Jobs that generate load.
type K6Spec struct {
	// Image is the k6 container image. Pin it: the results format is read by the
	// operator.
	// +optional
	// +kubebuilder:default="grafana/k6:1.8.1"
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=512
	Image string `json:"image,omitempty"`

	// Parallelism is the number of k6 pods per window; the rate is split evenly
	// between them. Raise it when one k6 pod cannot hold the rate.
	// +optional
	// +kubebuilder:default=1
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=20
	Parallelism int32 `json:"parallelism,omitempty"`

	// PreAllocatedVUs is the number of virtual users each k6 pod starts with.
	// Defaults to enough for the stage's rate at one second of latency.
	// +optional
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=20000
	PreAllocatedVUs *int32 `json:"preAllocatedVUs,omitempty"`

	// MaxVUs caps the virtual users of each k6 pod. Iterations the VUs cannot start
	// in time are counted as dropped and flag the window, because then the load
	// generator, not the target, fell short.
	// +optional
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=50000
	MaxVUs *int32 `json:"maxVUs,omitempty"`

	// Resources of each k6 container. Defaults to a 1 CPU, 512Mi limit.
	// +optional
	Resources *ResourcesSpec `json:"resources,omitempty"`

	// Env adds environment variables to the k6 container: k6 options (K6_*),
	// what an output of extraArgs reads (K6_PROMETHEUS_RW_SERVER_URL), or values
	// a scriptRef script reads from __ENV; valueFrom may read a Secret. The
	// variables the operator sets are refused: PERF_*, JOB_COMPLETION_INDEX,
	// K6_NO_USAGE_REPORT, K6_AUTO_EXTENSION_RESOLUTION and GOMEMLIMIT.
	// +optional
	// +listType=map
	// +listMapKey=name
	// +kubebuilder:validation:MaxItems=64
	// +kubebuilder:validation:XValidation:rule="self.all(e, !e.name.startsWith('PERF_') && !(e.name in ['JOB_COMPLETION_INDEX', 'K6_NO_USAGE_REPORT', 'K6_AUTO_EXTENSION_RESOLUTION', 'GOMEMLIMIT']))",message="must not set a variable the operator sets: PERF_*, JOB_COMPLETION_INDEX, K6_NO_USAGE_REPORT, K6_AUTO_EXTENSION_RESOLUTION, GOMEMLIMIT"
	Env []corev1.EnvVar `json:"env,omitempty"`

	// ExtraArgs are added to `k6 run` before the script, such as
	// ["--out", "experimental-prometheus-rw"] or ["--tag", "team=shop"]. Flags
	// that would change the load or hide its results are refused: --vus,
	// --duration, --iterations, --stage, --paused, --address, --no-summary,
	// --summary-export, --quiet and --include-system-env-vars (and their short
	// forms).
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=32
	// +kubebuilder:validation:items:MaxLength=1024
	// +kubebuilder:validation:XValidation:rule="self.all(a, !a.matches('^(-u|-d|-i|-s|-p|-q|--vus|--duration|--iterations|--stage|--paused|--address|--no-summary|--summary-export|--quiet|--include-system-env-vars)(=.*)?$'))",message="must not set a flag the operator sets or that hides the results: --vus, --duration, --iterations, --stage, --paused, --address, --no-summary, --summary-export, --quiet, --include-system-env-vars"
	ExtraArgs []string `json:"extraArgs,omitempty"`

	// NodeSelector restricts the k6 pods to nodes with these labels.
	// +optional
	// +kubebuilder:validation:MaxProperties=32
	NodeSelector map[string]string `json:"nodeSelector,omitempty"`

	// Tolerations let the k6 pods run on tainted nodes, such as a load-generator
	// node pool.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=32
	Tolerations []corev1.Toleration `json:"tolerations,omitempty"`

	// Affinity of the k6 pods (a Kubernetes Affinity: nodeAffinity,
	// podAffinity, podAntiAffinity). The operator's preference for nodes without
	// the target's pods is added to its pod anti-affinity. Its schema is left to
	// the Job's own validation, which keeps the CRD small.
	// +optional
	// +kubebuilder:validation:Schemaless
	// +kubebuilder:validation:Type=object
	// +kubebuilder:pruning:PreserveUnknownFields
	Affinity *corev1.Affinity `json:"affinity,omitempty"`

	// PodLabels are added to the k6 pods (for example to opt them out of a
	// service mesh). Keys under perfexp.dev/ and the Job controller's own
	// (job-name, controller-uid, batch.kubernetes.io/*) are refused.
	// +optional
	// +kubebuilder:validation:MaxProperties=32
	// +kubebuilder:validation:XValidation:rule="self.all(k, !k.startsWith('perfexp.dev/') && !k.startsWith('batch.kubernetes.io/') && !(k in ['job-name', 'controller-uid']))",message="must not set a label the operator or the Job controller sets: perfexp.dev/*, batch.kubernetes.io/*, job-name, controller-uid"
	PodLabels map[string]string `json:"podLabels,omitempty"`

	// PodAnnotations are added to the k6 pods, such as
	// sidecar.istio.io/inject: "false" to keep a mesh sidecar out of the load.
	// +optional
	// +kubebuilder:validation:MaxProperties=32
	PodAnnotations map[string]string `json:"podAnnotations,omitempty"`

	// ImagePullSecrets name Secrets in the experiment's namespace to pull
	// spec.load.k6.image with.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=16
	ImagePullSecrets []corev1.LocalObjectReference `json:"imagePullSecrets,omitempty"`

	// ServiceAccountName runs the k6 pods as this ServiceAccount (for example one
	// with cloud credentials for an output); its token is then mounted as the
	// ServiceAccount says. Without it, the namespace's default ServiceAccount
	// runs them with no token.
	// +optional
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:XValidation:rule="self.matches('^[a-z0-9]([-a-z0-9]*[a-z0-9])?([.][a-z0-9]([-a-z0-9]*[a-z0-9])?)*$')",message="must be a ServiceAccount name (lower-case DNS subdomain)"
	ServiceAccountName string `json:"serviceAccountName,omitempty"`
}

// ResourcesSpec is a container's resource requests and limits.
type ResourcesSpec struct {
	// Requests are the resources the scheduler reserves.
	// +optional
	Requests *ResourceAmounts `json:"requests,omitempty"`

	// Limits are the most the container may use.
	// +optional
	Limits *ResourceAmounts `json:"limits,omitempty"`
}

// ResourceAmounts are amounts of CPU and memory.
type ResourceAmounts struct {
	// CPU in cores, such as 500m or 2.
	// +optional
	CPU *resource.Quantity `json:"cpu,omitempty"`

	// Memory in bytes, such as 512Mi.
	// +optional
	Memory *resource.Quantity `json:"memory,omitempty"`
}

// WarmupSpec is the load run before the first stage, excluded from results.
type WarmupSpec struct {
	// QPS is the warm-up arrival rate in requests per second.
	// +required
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=100000
	QPS int32 `json:"qps"`

	// Duration of the warm-up.
	// +required
	// +kubebuilder:validation:XValidation:rule="!self.matches('^([0-9]{1,6}([.][0-9]+)?(ns|us|ms|s|m|h))+$') || (duration(self) >= duration('1s') && duration(self) <= duration('24h'))",message="must be between 1s and 24h"
	Duration Duration `json:"duration"`
}

// StageSpec is one load level: an open-loop arrival rate (qps, k6's
// constant-arrival-rate: a slow target does not slow the load down) or a
// closed-loop number of virtual users (concurrency, k6's constant-vus, as
// siege -c or wrk -c: each user sends its next request when the last one has
// answered).
//
// +kubebuilder:validation:XValidation:rule="has(self.qps) != has(self.concurrency)",message="set exactly one of qps (an arrival rate) or concurrency (closed-loop virtual users)"
type StageSpec struct {
	// QPS is the stage's arrival rate in requests per second.
	// +optional
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=100000
	QPS int32 `json:"qps,omitempty"`

	// Concurrency is the stage's number of closed-loop virtual users.
	// +optional
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=10000
	Concurrency int32 `json:"concurrency,omitempty"`

	// Name labels the stage in status and reports. Defaults to the QPS, or to
	// c and the concurrency (c10).
	// +optional
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:XValidation:rule="self.matches('^[a-z0-9]([-a-z0-9]*[a-z0-9])?$')",message="must be a lower-case DNS label, such as peak or 2000qps"
	Name string `json:"name,omitempty"`
}

// WindowsSpec are the window lengths of every stage.
type WindowsSpec struct {
	// Baseline is how long the target is measured with the toggle off.
	// +optional
	// +kubebuilder:default="30m"
	// +kubebuilder:validation:XValidation:rule="!self.matches('^([0-9]{1,6}([.][0-9]+)?(ns|us|ms|s|m|h))+$') || (duration(self) >= duration('20s') && duration(self) <= duration('24h'))",message="must be between 20s and 24h: shorter windows cannot be measured"
	Baseline Duration `json:"baseline,omitempty"`

	// Treatment is how long the target is measured with the toggle on.
	// +optional
	// +kubebuilder:default="30m"
	// +kubebuilder:validation:XValidation:rule="!self.matches('^([0-9]{1,6}([.][0-9]+)?(ns|us|ms|s|m|h))+$') || (duration(self) >= duration('20s') && duration(self) <= duration('24h'))",message="must be between 20s and 24h: shorter windows cannot be measured"
	Treatment Duration `json:"treatment,omitempty"`

	// Settle follows every toggle change and its rollout, under load, before the
	// next measured window; it is excluded from results. 0s is allowed for runtime
	// toggles that need no warm-up.
	// +optional
	// +kubebuilder:default="2m"
	// +kubebuilder:validation:XValidation:rule="!self.matches('^([0-9]{1,6}([.][0-9]+)?(ns|us|ms|s|m|h))+$') || duration(self) <= duration('1h')",message="must be between 0s and 1h"
	Settle Duration `json:"settle,omitempty"`
}

// KneeSpec says when a stage of a sweep is past the target's capacity: the
// first stage whose achieved rate falls short of what it asked for, or whose
// p99 latency exceeds p99Factor times the first stage's.
type KneeSpec struct {
	// RateShortfall is how far the achieved rate may fall below the asked one
	// before the stage counts as past capacity. A qps stage asks for its rate;
	// a concurrency stage for the rate the stage before it reached, scaled by
	// the ratio of their concurrencies (below capacity a closed loop's rate
	// grows with its users).
	// +optional
	// +kubebuilder:default="10%"
	RateShortfall Percent `json:"rateShortfall,omitempty"`

	// P99Factor is how many times the first stage's p99 latency a stage's p99
	// may reach before the stage counts as past capacity.
	// +optional
	// +kubebuilder:default=3
	// +kubebuilder:validation:Minimum=2
	// +kubebuilder:validation:Maximum=1000
	P99Factor int32 `json:"p99Factor,omitempty"`
}

// ArmSpec is one variant of an experiment with spec.variants: a named toggle
// measured against the shared baseline.
type ArmSpec struct {
	// Name labels the variant in the status, its windows and Jobs, such as
	// serial.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=20
	// +kubebuilder:validation:XValidation:rule="self.matches('^[a-z0-9]([-a-z0-9]*[a-z0-9])?$')",message="must be a lower-case DNS label, such as serial"
	Name string `json:"name"`

	// Toggle is the variant's change. Exactly one kind is set.
	Toggle ToggleSpec `json:"toggle"`
}

// ToggleSpec is the change under test. Exactly one kind is set.
//
// +kubebuilder:validation:XValidation:rule="[has(self.env), has(self.jvmOption), has(self.args), has(self.http), has(self.exec)].filter(x, x).size() == 1",message="set exactly one toggle kind: env, jvmOption, args, http or exec"
type ToggleSpec struct {
	// Env sets (or removes) an environment variable of the target container. It
	// rolls the pods.
	// +optional
	Env *EnvToggle `json:"env,omitempty"`

	// JVMOption is merged into the container's JAVA_TOOL_OPTIONS, keeping what is
	// already there, such as -XX:+UseSerialGC. It rolls the pods.
	// +optional
	// +kubebuilder:validation:MinLength=2
	// +kubebuilder:validation:MaxLength=1024
	// +kubebuilder:validation:XValidation:rule="self.startsWith('-')",message="must be a JVM option starting with '-', such as -XX:+UseSerialGC"
	JVMOption string `json:"jvmOption,omitempty"`

	// Args are appended to the target container's args. They roll the pods.
	// +optional
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=32
	// +kubebuilder:validation:items:MaxLength=1024
	// +listType=atomic
	Args []string `json:"args,omitempty"`

	// HTTP switches a feature at run time, without a restart, by sending a request
	// to every ready target pod; Revert is sent to switch it back.
	// +optional
	HTTP *HTTPToggle `json:"http,omitempty"`

	// Exec switches a feature at run time, without a restart, by running a
	// command in the target container of every ready target pod (the pods/exec
	// subresource), such as the JDK's jcmd starting a flight recording; Revert
	// is run to switch it back. The operator needs the pods/exec right for it,
	// which the Helm chart grants only with toggles.exec.enabled=true.
	// +optional
	Exec *ExecToggle `json:"exec,omitempty"`

	// OnRevertFailure is what happens when the revert keeps failing for
	// guardrails.revertTimeout: RestartPods deletes the pods the toggle may
	// still be on, so their Deployment replaces them with clean ones (a
	// template toggle is reverted in the template, so this applies to runtime
	// toggles); Keep leaves them running for inspection and ends the run with
	// the pods named in status.toggle.pods and the RevertFailing condition.
	// +optional
	// +kubebuilder:default=RestartPods
	OnRevertFailure RevertFailurePolicy `json:"onRevertFailure,omitempty"`
}

// RevertFailurePolicy says what to do with pods a revert cannot reach.
// +kubebuilder:validation:Enum=RestartPods;Keep
type RevertFailurePolicy string

// The revert failure policies.
const (
	RevertFailureRestartPods RevertFailurePolicy = "RestartPods"
	RevertFailureKeep        RevertFailurePolicy = "Keep"
)

// ExecToggle is a runtime switch: a command run in the target container of
// every ready pod, and its revert. Commands run without a shell; use
// ["sh", "-c", "..."] where the image has one.
type ExecToggle struct {
	// Command switches the feature on. Exit status 0 means success.
	// +required
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=64
	// +kubebuilder:validation:items:MaxLength=4096
	// +listType=atomic
	Command []string `json:"command"`

	// Revert switches the feature off again. It is run on every exit path: end of
	// treatment, abort, guardrail breach and deletion.
	// +required
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=64
	// +kubebuilder:validation:items:MaxLength=4096
	// +listType=atomic
	Revert []string `json:"revert"`

	// Timeout of each command in each pod. A command that has not exited by then
	// counts as failed, and may still have taken effect, so it is reverted.
	// +optional
	// +kubebuilder:default="30s"
	// +kubebuilder:validation:XValidation:rule="!self.matches('^([0-9]{1,6}([.][0-9]+)?(ns|us|ms|s|m|h))+$') || (duration(self) >= duration('1s') && duration(self) <= duration('5m'))",message="must be between 1s and 5m"
	Timeout Duration `json:"timeout,omitempty"`
}

// EnvToggle sets or removes one environment variable while the toggle is on.
//
// +kubebuilder:validation:XValidation:rule="has(self.value) != (has(self.remove) && self.remove)",message="set exactly one of value (the variable's value while the toggle is on) or remove: true (the variable is removed while the toggle is on)"
type EnvToggle struct {
	// Name of the variable.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=256
	// +kubebuilder:validation:XValidation:rule="self.matches('^[-._a-zA-Z][-._a-zA-Z0-9]*$')",message="must be an environment variable name (letters, digits, '_', '-', '.'; not starting with a digit)"
	Name string `json:"name"`

	// Value of the variable while the toggle is on.
	// +optional
	// +kubebuilder:validation:MaxLength=4096
	Value *string `json:"value,omitempty"`

	// Remove removes the variable while the toggle is on.
	// +optional
	Remove bool `json:"remove,omitempty"`
}

// HTTPToggle is a runtime switch: a request to every ready pod, and its revert.
type HTTPToggle struct {
	// HTTPRequest switches the feature on.
	HTTPRequest `json:",inline"`

	// Port of the pods' admin endpoint.
	// +required
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=65535
	Port int32 `json:"port"`

	// Scheme of the admin endpoint.
	// +optional
	// +kubebuilder:default=http
	// +kubebuilder:validation:Enum=http;https
	Scheme string `json:"scheme,omitempty"`

	// Timeout of each request.
	// +optional
	// +kubebuilder:default="5s"
	// +kubebuilder:validation:XValidation:rule="!self.matches('^([0-9]{1,6}([.][0-9]+)?(ns|us|ms|s|m|h))+$') || (duration(self) >= duration('100ms') && duration(self) <= duration('1m'))",message="must be between 100ms and 1m"
	Timeout Duration `json:"timeout,omitempty"`

	// Revert switches the feature off again. It is sent on every exit path: end of
	// treatment, abort, guardrail breach and deletion.
	// +required
	Revert HTTPRequest `json:"revert"`
}

// HTTPRequest is one request of a runtime toggle. A 2xx answer means success.
type HTTPRequest struct {
	// Path of the request; it starts with a slash and may carry a query.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=2048
	// +kubebuilder:validation:XValidation:rule="self.startsWith('/')",message="must start with /, such as /admin/profiling"
	Path string `json:"path"`

	// Method is the HTTP method.
	// +optional
	// +kubebuilder:default=POST
	// +kubebuilder:validation:Enum=GET;POST;PUT;PATCH;DELETE
	Method string `json:"method,omitempty"`

	// Body of the request.
	// +optional
	// +kubebuilder:validation:MaxLength=4096
	Body string `json:"body,omitempty"`

	// Headers are added to the request.
	// +optional
	// +kubebuilder:validation:MaxItems=16
	// +listType=atomic
	Headers []HTTPHeader `json:"headers,omitempty"`
}

// MetricsSource is where resource samples come from.
// +kubebuilder:validation:Enum=auto;metrics-server;prometheus
type MetricsSource string

// The metrics sources.
const (
	// MetricsSourceAuto uses Prometheus when spec.metrics.prometheus is set and
	// reachable, metrics-server otherwise, and records which in status.
	MetricsSourceAuto MetricsSource = "auto"
	// MetricsSourceMetricsServer reads metrics.k8s.io; it has no heap metric.
	MetricsSourceMetricsServer MetricsSource = "metrics-server"
	// MetricsSourcePrometheus queries the Prometheus HTTP API.
	MetricsSourcePrometheus MetricsSource = "prometheus"
)

// MetricsSpec says where samples come from and how often they are taken.
type MetricsSpec struct {
	// Source of CPU, memory and heap samples.
	// +optional
	// +kubebuilder:default=auto
	Source MetricsSource `json:"source,omitempty"`

	// Interval between samples. metrics-server refreshes every 15s by default;
	// a shorter interval only repeats its values.
	// +optional
	// +kubebuilder:default="15s"
	// +kubebuilder:validation:XValidation:rule="!self.matches('^([0-9]{1,6}([.][0-9]+)?(ns|us|ms|s|m|h))+$') || (duration(self) >= duration('1s') && duration(self) <= duration('5m'))",message="must be between 1s and 5m"
	Interval Duration `json:"interval,omitempty"`

	// Prometheus is the Prometheus server to query.
	// +optional
	Prometheus *PrometheusSpec `json:"prometheus,omitempty"`

	// Queries override the default PromQL. Each is a template with the
	// placeholders {{namespace}}, {{pod}} (an anchored regular expression of the
	// target's pod names) and {{container}}, used inside double-quoted label
	// matchers, and {{range}} (a rate range: the sampling interval, at least 1m)
	// outside them; the operator escapes every substituted value. Defaults cover
	// kube-prometheus-stack's cAdvisor series, JVM (Prometheus client and
	// OpenTelemetry names) and Go heap metrics.
	// +optional
	Queries *MetricQueries `json:"queries,omitempty"`
}

// PrometheusSpec is the Prometheus HTTP API endpoint.
type PrometheusSpec struct {
	// URL of the Prometheus server, such as
	// http://prometheus-operated.monitoring:9090.
	// +required
	// +kubebuilder:validation:MaxLength=2048
	// +kubebuilder:validation:XValidation:rule="self.matches('^https?://[^/?#[:space:]]+(/[^?#[:space:]]*)?$')",message="must be an absolute http:// or https:// URL, such as http://prometheus-operated.monitoring:9090"
	URL string `json:"url"`
}

// MetricQueries are PromQL templates, each returning one series per pod.
type MetricQueries struct {
	// CPU returns each pod's CPU use in cores.
	// +optional
	// +kubebuilder:validation:MaxLength=4096
	CPU string `json:"cpu,omitempty"`

	// Memory returns each pod's working-set bytes.
	// +optional
	// +kubebuilder:validation:MaxLength=4096
	Memory string `json:"memory,omitempty"`

	// Heap returns each pod's heap bytes in use (after GC when the runtime exports
	// it).
	// +optional
	// +kubebuilder:validation:MaxLength=4096
	Heap string `json:"heap,omitempty"`

	// GC returns each pod's share of time spent in garbage collection, in
	// seconds per second (a rate over {{range}}). The default reads the
	// collection time the JVM (client_java, Micrometer, OpenTelemetry) or the
	// Go runtime exports; a pod that exports none has no GC row.
	// +optional
	// +kubebuilder:validation:MaxLength=4096
	GC string `json:"gc,omitempty"`
}

// GuardrailsSpec are the automatic abort rules.
type GuardrailsSpec struct {
	// Heap watches for runaway heap or working-set growth.
	// +optional
	// +kubebuilder:default={}
	Heap HeapGuardrail `json:"heap,omitempty"`

	// ErrorRate aborts when the share of failed load requests exceeds it.
	// +optional
	// +kubebuilder:default="5%"
	ErrorRate Percent `json:"errorRate,omitempty"`

	// MaxRestarts aborts when target containers restart more than this many times
	// in all after the first toggle. An OOM kill always aborts.
	// +optional
	// +kubebuilder:default=0
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=100
	MaxRestarts int32 `json:"maxRestarts,omitempty"`

	// RolloutTimeout is how long a rollout caused by the toggle (or its revert) may
	// take before the experiment aborts and reverts. Defaults to the Deployment's
	// progressDeadlineSeconds.
	// +optional
	// +kubebuilder:validation:XValidation:rule="!self.matches('^([0-9]{1,6}([.][0-9]+)?(ns|us|ms|s|m|h))+$') || (duration(self) >= duration('10s') && duration(self) <= duration('2h'))",message="must be between 10s and 2h"
	RolloutTimeout Duration `json:"rolloutTimeout,omitempty"`

	// RevertTimeout is how long a failing revert is retried (with bounded
	// backoff, the RevertFailing condition set and a Warning event at once)
	// before toggle.onRevertFailure decides and the run ends.
	// +optional
	// +kubebuilder:default="2m"
	// +kubebuilder:validation:XValidation:rule="!self.matches('^([0-9]{1,6}([.][0-9]+)?(ns|us|ms|s|m|h))+$') || (duration(self) >= duration('10s') && duration(self) <= duration('1h'))",message="must be between 10s and 1h"
	RevertTimeout Duration `json:"revertTimeout,omitempty"`
}

// HeapGuardrail detects runaway growth early, while ignoring a healthy GC sawtooth.
type HeapGuardrail struct {
	// MaxGrowthPerMinute is the sustained growth (robust trend of heap after GC, or
	// of the working set) beyond which the experiment aborts.
	// +optional
	// +kubebuilder:default="100Mi"
	// +kubebuilder:validation:XValidation:rule="!isQuantity(string(self)) || quantity(string(self)).isGreaterThan(quantity('0'))",message="must be a positive quantity of bytes per minute, such as 100Mi"
	MaxGrowthPerMinute *resource.Quantity `json:"maxGrowthPerMinute,omitempty"`

	// MaxUtilization is the share of the memory limit that aborts at once.
	// +optional
	// +kubebuilder:default="90%"
	MaxUtilization Percent `json:"maxUtilization,omitempty"`

	// ConsecutiveBreaches is how many samples in a row must breach the growth rule
	// before it aborts; it filters out single spikes.
	// +optional
	// +kubebuilder:default=3
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=20
	ConsecutiveBreaches int32 `json:"consecutiveBreaches,omitempty"`
}

// SuccessCriteria are the largest acceptable relative overheads.
//
// +kubebuilder:validation:MinProperties=1
type SuccessCriteria struct {
	// MaxCPUOverhead is the largest acceptable CPU overhead, relative to baseline.
	// +optional
	MaxCPUOverhead Percent `json:"maxCPUOverhead,omitempty"`

	// MaxMemoryOverhead is the largest acceptable memory overhead.
	// +optional
	MaxMemoryOverhead Percent `json:"maxMemoryOverhead,omitempty"`

	// MaxP99Overhead is the largest acceptable p99 latency overhead.
	// +optional
	MaxP99Overhead Percent `json:"maxP99Overhead,omitempty"`
}

// JobsPolicy says what happens to finished k6 Jobs.
// +kubebuilder:validation:Enum=Delete;Keep
type JobsPolicy string

// The Jobs policies.
const (
	// JobsPolicyDelete removes each k6 Job once its results are recorded.
	JobsPolicyDelete JobsPolicy = "Delete"
	// JobsPolicyKeep keeps the k6 Jobs until the experiment is deleted.
	JobsPolicyKeep JobsPolicy = "Keep"
)

// CleanupSpec is what is kept when the experiment ends.
type CleanupSpec struct {
	// Jobs is what happens to the k6 Jobs.
	// +optional
	// +kubebuilder:default=Delete
	Jobs JobsPolicy `json:"jobs,omitempty"`
}

// PerfExperiment measures the overhead of a toggle on a Deployment under
// fixed-rate load, stage by stage, and aborts and reverts it when a guardrail trips.
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:shortName=pexp,categories=perf
// +kubebuilder:printcolumn:name="Phase",type=string,JSONPath=`.status.phase`
// +kubebuilder:printcolumn:name="Stage",type=string,JSONPath=`.status.currentStage`
// +kubebuilder:printcolumn:name="Verdict",type=string,JSONPath=`.status.verdict`
// +kubebuilder:printcolumn:name="CPU",type=string,JSONPath=`.status.overhead.cpu`,description="CPU overhead of the toggle (largest over stages)"
// +kubebuilder:printcolumn:name="Memory",type=string,JSONPath=`.status.overhead.memory`,description="Memory overhead of the toggle (largest over stages)"
// +kubebuilder:printcolumn:name="P99",type=string,JSONPath=`.status.overhead.p99`,description="p99 latency overhead of the toggle (largest over stages)"
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
// +kubebuilder:validation:XValidation:rule="self.metadata.name.size() <= 63",message="metadata.name must be at most 63 characters: the name labels the experiment's Jobs, pods and target"
// +kubebuilder:validation:XValidation:rule="!has(oldSelf.status) || !has(oldSelf.status.phase) || oldSelf.status.phase == 'Pending' || (self.spec.target == oldSelf.spec.target && self.spec.load == oldSelf.spec.load && has(self.spec.warmup) == has(oldSelf.spec.warmup) && (!has(self.spec.warmup) || self.spec.warmup == oldSelf.spec.warmup) && self.spec.stages == oldSelf.spec.stages && self.spec.windows == oldSelf.spec.windows && has(self.spec.toggle) == has(oldSelf.spec.toggle) && (!has(self.spec.toggle) || self.spec.toggle == oldSelf.spec.toggle) && has(self.spec.variants) == has(oldSelf.spec.variants) && (!has(self.spec.variants) || self.spec.variants == oldSelf.spec.variants) && has(self.spec.knee) == has(oldSelf.spec.knee) && (!has(self.spec.knee) || self.spec.knee == oldSelf.spec.knee) && self.spec.metrics == oldSelf.spec.metrics && self.spec.guardrails == oldSelf.spec.guardrails && has(self.spec.successCriteria) == has(oldSelf.spec.successCriteria) && (!has(self.spec.successCriteria) || self.spec.successCriteria == oldSelf.spec.successCriteria) && self.spec.cleanup == oldSelf.spec.cleanup)",fieldPath=".spec",reason="FieldValueForbidden",message="is immutable once the experiment has started: only spec.abort may change; create a new PerfExperiment to change the plan"
type PerfExperiment struct {
	metav1.TypeMeta `json:",inline"`

	// Standard object metadata.
	// +optional
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// Spec is the experiment's plan.
	// +required
	Spec PerfExperimentSpec `json:"spec"`

	// Status is what the operator observed and decided.
	// +optional
	Status PerfExperimentStatus `json:"status,omitempty"`
}

// PerfExperimentList is a list of PerfExperiments.
//
// +kubebuilder:object:root=true
type PerfExperimentList struct {
	metav1.TypeMeta `json:",inline"`
	// Standard list metadata.
	// +optional
	metav1.ListMeta `json:"metadata,omitempty"`
	// Items are the experiments.
	Items []PerfExperiment `json:"items"`
}

func init() {
	SchemeBuilder.Register(&PerfExperiment{}, &PerfExperimentList{})
}
