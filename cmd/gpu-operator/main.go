package main

import (
	"errors"
	"flag"
	"fmt"
	"os"

	"k8s.io/apimachinery/pkg/runtime"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	gpuv1 "github.com/gpu-operator/gpu-operator/api/v1"
	"github.com/gpu-operator/gpu-operator/internal/version"
)

// namespaceEnv names the environment variable holding the namespace the
// operator runs in and deploys its operands to.
const namespaceEnv = "OPERATOR_NAMESPACE"

type options struct {
	metricsAddr   string
	probeAddr     string
	leaderElect   bool
	leaderElectID string
	showVersion   bool
	zap           zap.Options
	namespace     string
}

func parseFlags(args []string) (*options, error) {
	o := &options{}
	fs := flag.NewFlagSet("gpu-operator", flag.ContinueOnError)
	fs.StringVar(&o.metricsAddr, "metrics-bind-address", ":8080", "Address the Prometheus metrics endpoint binds to; 0 disables it.")
	fs.StringVar(&o.probeAddr, "health-probe-bind-address", ":8081", "Address the /healthz and /readyz endpoints bind to.")
	fs.BoolVar(&o.leaderElect, "leader-elect", false, "Elect a leader so that only one replica acts at a time.")
	fs.StringVar(&o.leaderElectID, "leader-election-id", "gpu-operator.nvidia.com", "Name of the Lease used for leader election.")
	fs.BoolVar(&o.showVersion, "version", false, "Print the version and exit.")
	o.zap.BindFlags(fs)
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	if o.showVersion {
		return o, nil
	}
	o.namespace = os.Getenv(namespaceEnv)
	if o.namespace == "" {
		return nil, fmt.Errorf("%s is not set: set it to the namespace the operator runs in (the helm chart does this)", namespaceEnv)
	}
	return o, nil
}

func newScheme() *runtime.Scheme {
	s := runtime.NewScheme()
	utilruntime.Must(clientgoscheme.AddToScheme(s))
	utilruntime.Must(gpuv1.AddToScheme(s))
	return s
}

func run(o *options) error {
	ctrl.SetLogger(zap.New(zap.UseFlagOptions(&o.zap)))
	log := ctrl.Log.WithName("setup")
	log.Info("starting gpu-operator", "version", version.Version, "namespace", o.namespace)

	mgr, err := ctrl.NewManager(ctrl.GetConfigOrDie(), ctrl.Options{
		Scheme:                        newScheme(),
		Metrics:                       metricsserver.Options{BindAddress: o.metricsAddr},
		HealthProbeBindAddress:        o.probeAddr,
		LeaderElection:                o.leaderElect,
		LeaderElectionID:              o.leaderElectID,
		LeaderElectionNamespace:       o.namespace,
		LeaderElectionReleaseOnCancel: true,
	})
	if err != nil {
		return fmt.Errorf("creating the manager: %w", err)
	}
	if err := mgr.AddHealthzCheck("healthz", healthz.Ping); err != nil {
		return fmt.Errorf("adding the health check: %w", err)
	}
	if err := mgr.AddReadyzCheck("readyz", healthz.Ping); err != nil {
		return fmt.Errorf("adding the readiness check: %w", err)
	}
	if err := mgr.Start(ctrl.SetupSignalHandler()); err != nil {
		return fmt.Errorf("running the manager: %w", err)
	}
	return nil
}

func main() {
	o, err := parseFlags(os.Args[1:])
	switch {
	case errors.Is(err, flag.ErrHelp):
		return
	case err != nil:
		fmt.Fprintln(os.Stderr, "gpu-operator:", err)
		os.Exit(2)
	case o.showVersion:
		fmt.Println(version.Version)
		return
	}
	if err := run(o); err != nil {
		fmt.Fprintln(os.Stderr, "gpu-operator:", err)
		os.Exit(1)
	}
}
