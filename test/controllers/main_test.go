package controllers

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap/zapcore"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
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
)

const (
	namespace = "gpu-operator"
	// grace is short so that outages beyond it happen within a test.
	grace = 3 * time.Second
)

var (
	// k8sClient talks to the API server directly, as a user would.
	k8sClient client.Client
	// watchClient watches objects, for tests that look at every change.
	watchClient client.WithWatch
	// sim plays the DaemonSet controller and the kubelets.
	sim *cluster
	// operatorWrites counts the write requests the operator sends.
	operatorWrites atomic.Int64
)

func TestMain(m *testing.M) {
	os.Exit(run(m))
}

func run(m *testing.M) int {
	ctrl.SetLogger(zap.New(zap.UseDevMode(true), zap.Level(zapcore.Level(zapLevel()))))
	scheme := envtest.NewScheme()
	env, err := envtest.Start(client.Options{Scheme: scheme})
	if err != nil {
		fmt.Fprintln(os.Stderr, "test/controllers:", err)
		return 1
	}
	defer func() { _ = env.Stop() }()
	k8sClient = env.Client
	if watchClient, err = client.NewWithWatch(env.Config, client.Options{Scheme: scheme}); err != nil {
		fmt.Fprintln(os.Stderr, "creating a watch client:", err)
		return 1
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()

	if err := k8sClient.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: namespace}}); err != nil {
		fmt.Fprintln(os.Stderr, "creating the namespace:", err)
		return 1
	}
	testEnv = env
	testScheme = scheme
	if err := startOperator(); err != nil {
		fmt.Fprintln(os.Stderr, "starting the operator:", err)
		return 1
	}
	defer stopOperator()
	sim = newCluster(k8sClient, namespace)
	go sim.run(ctx)
	return m.Run()
}

var (
	testEnv    *envtest.Env
	testScheme *runtime.Scheme
	// stopManager stops the running manager and waits until it stopped.
	stopManager func()
)

// startOperator runs the real manager with the operator's cache settings and
// controllers, through a transport that counts its write requests.
func startOperator() error {
	scheme := testScheme
	cfg := rest.CopyConfig(testEnv.Config)
	cfg.WrapTransport = func(rt http.RoundTripper) http.RoundTripper {
		return roundTripper(func(req *http.Request) (*http.Response, error) {
			switch req.Method {
			case http.MethodPost, http.MethodPut, http.MethodPatch, http.MethodDelete:
				operatorWrites.Add(1)
			}
			return rt.RoundTrip(req)
		})
	}
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{
		Scheme:                 scheme,
		Cache:                  cacheconfig.Options(namespace),
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
	ctx, cancel := context.WithCancel(context.Background())
	if err := operator.Setup(mgr, operator.Config{Namespace: namespace, NodeWorkers: 4, Grace: grace, Metrics: m}); err != nil {
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
	stopManager = func() {
		cancel()
		<-done
	}
	return nil
}

func stopOperator() {
	if stopManager != nil {
		stopManager()
		stopManager = nil
	}
}

type roundTripper func(*http.Request) (*http.Response, error)

func (f roundTripper) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// zapLevel is info, or debug with GPU_OPERATOR_TEST_DEBUG set.
func zapLevel() int8 {
	if os.Getenv("GPU_OPERATOR_TEST_DEBUG") != "" {
		return -1
	}
	return 0
}
