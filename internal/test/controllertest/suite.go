package controllertest

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"sync/atomic"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap/zapcore"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/config"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/gpu-operator/gpu-operator/internal/cacheconfig"
	"github.com/gpu-operator/gpu-operator/internal/metrics"
	"github.com/gpu-operator/gpu-operator/internal/operator"
	"github.com/gpu-operator/gpu-operator/internal/test/envtest"
	"github.com/gpu-operator/gpu-operator/internal/test/fixture"
	"github.com/gpu-operator/gpu-operator/internal/timers"
)

// Namespace is the operator's namespace in every suite.
const Namespace = "gpu-operator"

// Suite is one test package's API server, the operator running against it,
// and the simulator playing the DaemonSet controller and the kubelets.
type Suite struct {
	// Client talks to the API server directly, as a user would.
	Client client.Client
	// WatchClient watches objects, for tests that look at every change.
	WatchClient client.WithWatch
	// Sim plays the DaemonSet controller and the kubelets.
	Sim *Cluster
	// Timers are the operator's, short ones: the grace period, the device
	// plugin's settle time, the timeouts.
	Timers timers.Timers

	env *envtest.Env
	// metrics are the running operator's.
	metrics *metrics.Metrics
	// writes counts the write requests the operator sends.
	writes atomic.Int64
	// stopManager stops the running manager and waits until it stopped.
	stopManager func()
	// nodes are the nodes the operator's controllers listed from the cache.
	nodes listedNodes
}

// Config is a copy of the API server's client config, for a client of a
// test's own (a read-only judgement, as kubectl gpu makes it).
func (s *Suite) Config() *rest.Config { return rest.CopyConfig(s.env.Config) }

// Run starts an API server, the operator and the simulator, points *suite
// at them, runs the package's tests and stops everything. It returns the
// exit code for os.Exit in TestMain.
func Run(m *testing.M, suite **Suite) int {
	ctrl.SetLogger(zap.New(zap.UseDevMode(true), zap.Level(zapcore.Level(zapLevel()))))
	scheme := envtest.NewScheme()
	env, err := envtest.Start(client.Options{Scheme: scheme})
	if err != nil {
		fmt.Fprintln(os.Stderr, "controllertest:", err)
		return 1
	}
	defer func() { _ = env.Stop() }()
	s := &Suite{Client: env.Client, env: env, Timers: fixture.Timers()}
	if s.WatchClient, err = client.NewWithWatch(env.Config, client.Options{Scheme: scheme}); err != nil {
		fmt.Fprintln(os.Stderr, "creating a watch client:", err)
		return 1
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	if err := s.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: Namespace}}); err != nil {
		fmt.Fprintln(os.Stderr, "creating the namespace:", err)
		return 1
	}
	if err := s.StartOperator(); err != nil {
		fmt.Fprintln(os.Stderr, "starting the operator:", err)
		return 1
	}
	defer s.StopOperator()
	s.Sim = newCluster(s.Client, Namespace)
	stopWatching, err := s.Sim.watch(ctx, env.Config)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer stopWatching()
	go s.Sim.run(ctx)
	*suite = s
	code := m.Run()
	// Every test of the package passed with the cache's nodes as shared
	// objects: none may have been changed by the controllers reading them.
	s.StopOperator()
	if err := s.nodes.copies.Changed(); err != nil {
		fmt.Fprintln(os.Stderr, "FAIL: controllertest:", err)
		return 1
	}
	return code
}

// StartOperator runs the real manager with the operator's cache settings
// and controllers, through a transport that counts its write requests.
func (s *Suite) StartOperator() error {
	cfg := rest.CopyConfig(s.env.Config)
	cfg.WrapTransport = func(rt http.RoundTripper) http.RoundTripper {
		return roundTripper(func(req *http.Request) (*http.Response, error) {
			switch req.Method {
			case http.MethodPost, http.MethodPut, http.MethodPatch, http.MethodDelete:
				s.writes.Add(1)
			}
			return rt.RoundTrip(req)
		})
	}
	// The operator's own wiring: the maintenance controller keeps the
	// nodes it wrote trimmed by the cache's trimmer.
	nodes := cacheconfig.NewNodeTrimmer()
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{
		Scheme:                 s.Client.Scheme(),
		Cache:                  cacheconfig.Options(Namespace, nodes),
		Client:                 cacheconfig.ClientOptions(),
		Metrics:                metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress: "0",
		// Tests restart the manager in one process; the controller names
		// are registered again each time.
		Controller: config.Controller{SkipNameValidation: ptr.To(true)},
	})
	if err != nil {
		return err
	}
	m, err := metrics.New(prometheus.NewRegistry())
	if err != nil {
		return err
	}
	s.metrics = m
	ctx, cancel := context.WithCancel(context.Background())
	s.nodes.use(cacheconfig.CachedNodes{Informers: mgr.GetCache()})
	if err := operator.Setup(mgr, operator.Config{Namespace: Namespace, NodeWorkers: 4, Timers: s.Timers, Metrics: m,
		TrimNode: nodes.Node, Nodes: &s.nodes}); err != nil {
		cancel()
		return err
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := mgr.Start(ctx); err != nil {
			fmt.Fprintln(os.Stderr, "manager stopped:", err)
		}
	}()
	s.stopManager = func() {
		cancel()
		<-done
	}
	return nil
}

// StopOperator stops the manager, as a crash would between two reconciles.
func (s *Suite) StopOperator() {
	if s.stopManager != nil {
		s.stopManager()
		s.stopManager = nil
	}
}

// RestartOperatorWith restarts the operator with timers changed for one
// test, and with the suite's own again once the test ends: a test of what
// happens when a wait ends need not wait out the suite's longer one.
func (s *Suite) RestartOperatorWith(t *testing.T, change func(*timers.Timers)) {
	t.Helper()
	restart := func(with timers.Timers) {
		s.StopOperator()
		s.Timers = with
		if err := s.StartOperator(); err != nil {
			t.Fatalf("restarting the operator: %v", err)
		}
	}
	suite := s.Timers
	changed := suite
	change(&changed)
	// Registered first: a failed restart still leaves the suite's timers
	// and a running operator to the tests after this one.
	t.Cleanup(func() { restart(suite) })
	restart(changed)
}

// Writes is how many write requests the operator has sent.
func (s *Suite) Writes() int64 { return s.writes.Load() }

type roundTripper func(*http.Request) (*http.Response, error)

func (f roundTripper) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// zapLevel is info, or debug with GPU_OPERATOR_TEST_DEBUG set.
func zapLevel() int8 {
	if os.Getenv("GPU_OPERATOR_TEST_DEBUG") != "" {
		return -1
	}
	return 0
}
