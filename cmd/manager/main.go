// Command manager runs the perf-operator: the PerfExperiment controller with
// leader election, health and readiness probes and a Prometheus metrics endpoint.
// It shuts down cleanly on SIGTERM or SIGINT.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net/http"
	"os"
	"runtime/debug"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/runtime"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/record"
	metricsclientset "k8s.io/metrics/pkg/client/clientset/versioned"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	perfv1 "perfexp.dev/perf-operator/api/v1alpha1"
	"perfexp.dev/perf-operator/controllers"
	"perfexp.dev/perf-operator/internal/toggle"
)

// options are the manager's command-line flags.
type options struct {
	metricsAddr       string
	probeAddr         string
	pprofAddr         string
	leaderElect       bool
	leaderElectionNS  string
	watchNamespaces   string
	shutdownTimeout   time.Duration
	execToggles       bool
	workers           int
	authorize         bool
	authzTTL          time.Duration
	allowedPrometheus string
	allowedK6Images   string
	metricsSecure     bool
	abortAll          bool
	abortTimeout      time.Duration
	memoryLimit       string
	apiCompression    bool
}

func main() {
	var o options
	flag.StringVar(&o.metricsAddr, "metrics-bind-address", ":8080", "Address the Prometheus metrics endpoint binds to; \"0\" disables it.")
	flag.StringVar(&o.probeAddr, "health-probe-bind-address", ":8081", "Address the /healthz and /readyz probes bind to.")
	flag.StringVar(&o.pprofAddr, "pprof-bind-address", "", "Address net/http/pprof's endpoints bind to, for profiling (test/bench/scale); empty (the default) serves none.")
	flag.BoolVar(&o.leaderElect, "leader-elect", false, "Elect a leader so only one replica reconciles at a time (enable when running more than one replica).")
	flag.StringVar(&o.leaderElectionNS, "leader-election-namespace", "", "Namespace of the leader-election Lease; defaults to the pod's namespace.")
	flag.StringVar(&o.watchNamespaces, "watch-namespaces", "", "Comma-separated namespaces to watch; empty watches all namespaces (cluster-wide RBAC needed).")
	flag.BoolVar(&o.execToggles, "exec-toggles", false, "Run exec toggles (commands in the target pods through pods/exec); needs get and create on pods/exec. Off: experiments with an exec toggle are refused before they change anything.")
	flag.BoolVar(&o.metricsSecure, "metrics-secure", true, "Serve metrics over HTTPS (a self-signed certificate unless one is mounted) to callers the API server authenticates (TokenReview) and authorises for GET /metrics (SubjectAccessReview; the chart's metrics-reader ClusterRole grants it). Off: plain HTTP to anyone who reaches the port.")
	flag.BoolVar(&o.authorize, "authorize-requesters", true, "Check with SubjectAccessReviews that the user stamped on each experiment by the chart's requester policy may do each of its effects themselves (patch the target, create Jobs, pods/proxy, pods/exec, delete pods); refused or unstamped experiments stall with Forbidden. Turn off only where every experiment author is trusted with the operator's own rights.")
	flag.DurationVar(&o.authzTTL, "authorization-cache-ttl", time.Minute, "How long a SubjectAccessReview answer is reused; a revoked right takes effect within it.")
	flag.StringVar(&o.allowedPrometheus, "allowed-prometheus-urls", "", "Comma-separated scheme://host:port of the Prometheus servers experiments may query; empty allows any (the operator then queries any address an experiment author names, from its own network position).")
	flag.StringVar(&o.allowedK6Images, "allowed-k6-images", "", "Comma-separated glob patterns of the images the k6 load Jobs may run, such as grafana/k6:*; empty allows any.")
	flag.IntVar(&o.workers, "workers", 4, "How many experiments are reconciled at once (each one at a time, in order); a slow target's toggle or metrics query holds only one of them, for at most its timeout.")
	flag.BoolVar(&o.abortAll, "abort-all", false, "Do not run the operator: set spec.abort on every experiment that has not ended (in --watch-namespaces, or all), wait until each has ended with its toggle switched back, and exit; non-zero, naming them, on those still running after --abort-timeout. The chart's pre-delete hook runs it, so an uninstall never leaves a toggle on.")
	flag.DurationVar(&o.abortTimeout, "abort-timeout", 5*time.Minute, "How long --abort-all waits for the experiments to end.")
	flag.DurationVar(&o.shutdownTimeout, "graceful-shutdown-timeout", 30*time.Second, "How long in-flight reconciles may take to finish on SIGTERM.")
	flag.StringVar(&o.memoryLimit, "memory-limit", defaultMemoryLimit, "Soft limit of the manager's Go memory (the runtime's GOMEMLIMIT), as a quantity such as 64Mi: the garbage collector runs more often near it instead of letting the heap grow to twice what is live. \"0\" sets none. The GOMEMLIMIT environment variable, when set, wins.")
	flag.BoolVar(&o.apiCompression, "api-compression", false, "Ask the API server for gzip-compressed responses, watches included. Off (the default, as Kubernetes' controller-manager and scheduler run): in the cluster's network compression costs CPU at both ends and gains no time; turn it on when the operator reaches the API server over a slow link.")
	zapOpts := zap.Options{}
	zapOpts.BindFlags(flag.CommandLine)
	flag.Parse()
	ctrl.SetLogger(lazyValues(zap.New(zap.UseFlagOptions(&zapOpts))))
	if err := setMemoryLimit(o.memoryLimit); err != nil {
		ctrl.Log.Error(err, "--memory-limit")
		os.Exit(2)
	}

	if err := run(o); err != nil {
		ctrl.Log.Error(err, "manager exited with an error")
		os.Exit(1)
	}
}

// run starts the manager and blocks until a termination signal arrives.
func run(o options) error {
	scheme := runtime.NewScheme()
	utilruntime.Must(clientgoscheme.AddToScheme(scheme))
	utilruntime.Must(perfv1.AddToScheme(scheme))

	cfg, err := restConfig(o)
	if err != nil {
		return err
	}
	if o.abortAll {
		c, err := client.New(cfg, client.Options{Scheme: scheme})
		if err != nil {
			return err
		}
		if err := abortAll(ctrl.SetupSignalHandler(), c, splitList(o.watchNamespaces), o.abortTimeout, 2*time.Second); err != nil {
			return err
		}
		ctrl.Log.Info("every experiment has ended with its toggle switched back")
		return nil
	}
	events := record.NewBroadcaster(record.WithCorrelatorOptions(record.CorrelatorOptions{LRUCacheSize: eventCacheSize}))
	defer events.Shutdown() // the manager stops only a broadcaster it made
	mgrOpts := ctrl.Options{
		Scheme:                  scheme,
		Cache:                   controllers.CacheOptions(),
		Metrics:                 metricsserver.Options{BindAddress: o.metricsAddr, SecureServing: o.metricsSecure},
		HealthProbeBindAddress:  o.probeAddr,
		PprofBindAddress:        o.pprofAddr,
		LeaderElection:          o.leaderElect,
		LeaderElectionID:        "perf-operator.perfexp.dev",
		LeaderElectionNamespace: o.leaderElectionNS,
		// Give up leadership as soon as the manager stops, so a new replica
		// takes over at once instead of waiting out the lease.
		LeaderElectionReleaseOnCancel: true,
		GracefulShutdownTimeout:       &o.shutdownTimeout,
		EventBroadcaster:              events,
	}
	if ns := splitList(o.watchNamespaces); len(ns) > 0 {
		mgrOpts.Cache.DefaultNamespaces = map[string]cache.Config{}
		for _, n := range ns {
			mgrOpts.Cache.DefaultNamespaces[n] = cache.Config{}
		}
	}
	if o.metricsSecure {
		// A TokenReview and a SubjectAccessReview per caller (metricsauth.go).
		mgrOpts.Metrics.FilterProvider = metricsAuthFilter
	}
	mgr, err := ctrl.NewManager(cfg, mgrOpts)
	if err != nil {
		return fmt.Errorf("creating manager: %w", err)
	}
	// Every client shares the manager's HTTP client: one connection to the
	// API server, not one (with its reader and writer goroutines) per client.
	ms, err := metricsclientset.NewForConfigAndClient(cfg, mgr.GetHTTPClient())
	if err != nil {
		return fmt.Errorf("creating the metrics.k8s.io client: %w", err)
	}
	core, err := corev1client.NewForConfigAndClient(cfg, mgr.GetHTTPClient())
	if err != nil {
		return fmt.Errorf("creating the core client: %w", err)
	}
	statusMeta, err := metadata.NewForConfigAndClient(cfg, mgr.GetHTTPClient())
	if err != nil {
		return fmt.Errorf("creating the metadata client: %w", err)
	}
	r := &controllers.PerfExperimentReconciler{
		Metrics:   controllers.ClusterMetrics{MetricsServer: ms},
		Client:    mgr.GetClient(),
		APIReader: mgr.GetAPIReader(),
		// Status patches answered with metadata only, addressed by resource.
		StatusMetadata: statusMeta,
		Scheme:         mgr.GetScheme(),
		Recorder:       mgr.GetEventRecorderFor("perf-operator"),
		Clock:          clock.RealClock{},
		Workers:        o.workers,
		Allow:          controllers.AllowList{PrometheusURLs: splitList(o.allowedPrometheus), K6Images: splitList(o.allowedK6Images)},
		// Experiments of a namespace share their metrics queries.
		ShareMetrics: true,
	}
	if o.authorize {
		r.Reviewer = &controllers.Reviewer{Client: mgr.GetClient(), Clock: clock.RealClock{}, TTL: o.authzTTL}
	}
	if o.execToggles {
		r.Exec.Executor = toggle.RemoteExecutor{Config: cfg, Client: core.RESTClient()}
		if e := testExecutor(mgr.GetAPIReader()); e != nil {
			r.Exec.Executor = e // faultinject builds only: test/crash has no kubelet to exec in
		}
	}
	if err := r.SetupWithManager(mgr); err != nil {
		return fmt.Errorf("registering the PerfExperiment controller: %w", err)
	}
	if err := mgr.AddHealthzCheck("healthz", healthz.Ping); err != nil {
		return err
	}
	// Ready once the informer caches have synced: before that the controller
	// would act on an incomplete picture.
	if err := mgr.AddReadyzCheck("readyz", func(req *http.Request) error {
		ctx, cancel := context.WithTimeout(req.Context(), time.Second)
		defer cancel()
		if !mgr.GetCache().WaitForCacheSync(ctx) {
			return errors.New("informer caches not synced")
		}
		return nil
	}); err != nil {
		return err
	}
	ctrl.Log.Info("starting manager", "watchNamespaces", o.watchNamespaces, "leaderElect", o.leaderElect, "execToggles", o.execToggles)
	if err := mgr.Start(ctrl.SetupSignalHandler()); err != nil {
		return fmt.Errorf("running manager: %w", err)
	}
	ctrl.Log.Info("manager stopped cleanly")
	return nil
}

// eventCacheSize bounds each of the event correlator's three caches (its
// aggregator, the spam filter's per-object buckets and the last-seen events):
// client-go's default of 4,096 entries each was about 1.8 MB of the heap at
// 1,000 experiments (test/bench/scale), for an experiment's handful of
// distinct events. An experiment that falls out of the caches only has its
// next events counted afresh.
const eventCacheSize = 512

// defaultMemoryLimit is the manager's soft memory limit unless told otherwise:
// a little above the heap a thousand running experiments keep in use (about
// 50 MB, docs/scale.md) and well below the chart's container limit (256Mi),
// so the collector works harder long before the kernel would kill the pod.
const defaultMemoryLimit = "64Mi"

// setMemoryLimit applies --memory-limit unless GOMEMLIMIT is set (the runtime
// has applied it already).
func setMemoryLimit(v string) error {
	if os.Getenv("GOMEMLIMIT") != "" {
		return nil
	}
	q, err := resource.ParseQuantity(v)
	if err != nil {
		return err
	}
	if b := q.Value(); b > 0 {
		debug.SetMemoryLimit(b)
	}
	return nil
}

// splitList parses a comma-separated flag (--watch-namespaces, the allow-lists),
// dropping empty entries.
func splitList(s string) []string {
	var out []string
	for _, v := range strings.Split(s, ",") {
		if v = strings.TrimSpace(v); v != "" {
			out = append(out, v)
		}
	}
	return out
}

// restConfig loads the kubeconfig (in-cluster, --kubeconfig or $KUBECONFIG)
// and turns response compression off unless --api-compression asks for it:
// client-go asks for gzip by default, and the API server then compresses watch
// events too, which on a local network costs both ends CPU (at 1,000 running
// experiments a fifth of the manager's watch decoding was gunzip; docs/scale.md).
func restConfig(o options) (*rest.Config, error) {
	cfg, err := ctrl.GetConfig()
	if err != nil {
		return nil, fmt.Errorf("loading kubeconfig: %w", err)
	}
	if !o.apiCompression {
		cfg.DisableCompression = true
	}
	return cfg, nil
}
