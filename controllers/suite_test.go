package controllers_test

import (
	"context"
	"sync"

	"fmt"
	"github.com/go-logr/logr"
	"os"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/runtime"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/metadata"
	clocktesting "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/config"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	perfv1 "perfexp.dev/perf-operator/api/v1alpha1"
	"perfexp.dev/perf-operator/controllers"
	"perfexp.dev/perf-operator/internal/testenv"
	"perfexp.dev/perf-operator/internal/toggle"
)

var (
	env    *testenv.Env
	k8s    client.Client
	scheme = runtime.NewScheme()
)

func TestMain(m *testing.M) {
	if os.Getenv("TEST_LOG") != "" {
		log.SetLogger(zap.New(zap.UseDevMode(true)))
	} else {
		log.SetLogger(logr.Discard())
	}
	utilruntime.Must(clientgoscheme.AddToScheme(scheme))
	utilruntime.Must(perfv1.AddToScheme(scheme))
	os.Exit(run(m))
}

func run(m *testing.M) int {
	var err error
	if env, err = testenv.Start(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer env.Stop()
	if k8s, err = client.New(env.Config, client.Options{Scheme: scheme}); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return m.Run()
}

// operator is one running manager; stop it to simulate an operator crash.
type operator struct {
	cancel context.CancelFunc
	done   chan error
	// cache is the manager's cache, which the reconciler reads without
	// copies: tests check it still holds what the API server sent.
	cache client.Reader
}

// startOperator runs the reconciler in a manager with the production cache
// options and the given clock.
// runtimeToggles are the operator's runtime-toggle senders; the zero value
// reaches pod IPs directly and refuses exec toggles.
type runtimeToggles struct {
	http toggle.Sender
	exec toggle.Execer
	// review, when set, checks each experiment's requester with
	// SubjectAccessReviews, as the manager does by default.
	review bool
}

func startOperator(t *testing.T, clock *clocktesting.FakeClock, rt runtimeToggles) *operator {
	t.Helper()
	mgr, err := ctrl.NewManager(env.Config, ctrl.Options{
		Scheme:                 scheme,
		Cache:                  controllers.CacheOptions(),
		Metrics:                metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress: "0",
		Controller:             ctrlConfig(),
	})
	if err != nil {
		t.Fatal(err)
	}
	// The status patches go as the manager sends them (StatusMetadata).
	statusMeta, err := metadata.NewForConfigAndClient(env.Config, mgr.GetHTTPClient())
	if err != nil {
		t.Fatal(err)
	}
	r := &controllers.PerfExperimentReconciler{
		Client: mgr.GetClient(), APIReader: mgr.GetAPIReader(), Scheme: scheme,
		Recorder: mgr.GetEventRecorderFor("perf-operator"), Clock: clock, HTTP: rt.http, Exec: rt.exec,
		Metrics: metricsFor(clock), StatusMetadata: statusMeta,
	}
	if rt.review {
		r.Reviewer = &controllers.Reviewer{Client: mgr.GetClient(), Clock: clock, TTL: time.Minute}
	}
	if err := r.SetupWithManager(mgr); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	op := &operator{cancel: cancel, done: make(chan error, 1), cache: mgr.GetCache()}
	go func() { op.done <- mgr.Start(ctx) }()
	return op
}

func (o *operator) stop(t *testing.T) {
	t.Helper()
	o.cancel()
	select {
	case err := <-o.done:
		if err != nil {
			t.Fatalf("manager: %v", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("manager did not stop")
	}
}

// ctrlConfig lets each test start its own manager: controller names are
// otherwise unique per process.
func ctrlConfig() config.Controller {
	return config.Controller{SkipNameValidation: ptr.To(true)}
}

// fakes keeps one metrics source per test clock, so a restarted operator sees
// the same (possibly leaking) target as the one before it.
var fakes sync.Map

func metricsFor(clock *clocktesting.FakeClock) *fakeMetrics {
	f, _ := fakes.LoadOrStore(clock, &fakeMetrics{clock: clock})
	return f.(*fakeMetrics)
}
