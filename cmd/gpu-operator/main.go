package main

import (
	"crypto/tls"
	"errors"
	"flag"
	"fmt"
	"os"

	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/config"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/gpu-operator/gpu-operator/internal/cacheconfig"
	"github.com/gpu-operator/gpu-operator/internal/controller/node"
	"github.com/gpu-operator/gpu-operator/internal/metrics"
	"github.com/gpu-operator/gpu-operator/internal/metricsauth"
	"github.com/gpu-operator/gpu-operator/internal/operator"
	"github.com/gpu-operator/gpu-operator/internal/restconfig"
	"github.com/gpu-operator/gpu-operator/internal/scheme"
	"github.com/gpu-operator/gpu-operator/internal/timers"
	"github.com/gpu-operator/gpu-operator/internal/version"
)

// namespaceEnv names the environment variable holding the namespace the
// operator runs in and deploys its operands to.
const namespaceEnv = "OPERATOR_NAMESPACE"

type options struct {
	metricsAddr   string
	metricsSecure bool
	metricsCerts  string
	probeAddr     string
	pprofAddr     string
	leaderElect   bool
	leaderElectID string
	nodeWorkers   int
	// workloadProofs bounds the CUDA workload pods running at once.
	workloadProofs int
	timers         timers.Timers
	showVersion    bool
	zap            zap.Options
	namespace      string
	// installBinds: the install binds the operands' ClusterRoles (OLM).
	installBinds bool
}

func parseFlags(args []string) (*options, error) {
	o := &options{timers: timers.Defaults()}
	fs := flag.NewFlagSet("gpu-operator", flag.ContinueOnError)
	fs.StringVar(&o.metricsAddr, "metrics-bind-address", ":8443", "Address the Prometheus metrics endpoint binds to; 0 disables it.")
	fs.BoolVar(&o.metricsSecure, "metrics-secure", true,
		"Serve metrics over HTTPS to callers the API server authenticates (TokenReview) and authorizes (SubjectAccessReview: get on the /metrics URL); false serves plain HTTP to anyone who can reach the port.")
	fs.StringVar(&o.metricsCerts, "metrics-cert-dir", "",
		"Directory holding tls.crt and tls.key for the metrics endpoint, reloaded when they change; empty uses a self-signed certificate.")
	fs.StringVar(&o.probeAddr, "health-probe-bind-address", ":8081", "Address the /healthz and /readyz endpoints bind to.")
	fs.StringVar(&o.pprofAddr, "pprof-bind-address", "", "Address a net/http/pprof endpoint binds to, for profiling; empty disables it.")
	fs.BoolVar(&o.leaderElect, "leader-elect", false, "Elect a leader so that only one replica acts at a time.")
	fs.StringVar(&o.leaderElectID, "leader-election-id", "gpu-operator.nvidia.com", "Name of the Lease used for leader election.")
	fs.BoolVar(&o.showVersion, "version", false, "Print the version and exit.")
	fs.IntVar(&o.nodeWorkers, "node-workers", 32, "Nodes reconciled concurrently.")
	fs.IntVar(&o.workloadProofs, "workload-proofs", node.DefaultWorkloadProofs,
		"CUDA workload proofs (one pod each, on one node each) running at once across the cluster.")
	bind := fs.Bool("bind-operand-cluster-roles", true,
		"Bind each operand's ClusterRole (shipped by the install) to its ServiceAccount while the operand runs; false where the install binds them itself (OLM).")
	o.timers.BindFlags(fs)
	o.zap.BindFlags(fs)
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	o.installBinds = !*bind
	if o.showVersion {
		return o, nil
	}
	if o.nodeWorkers < 1 {
		return nil, fmt.Errorf("--node-workers=%d: must be at least 1", o.nodeWorkers)
	}
	if o.workloadProofs < 1 {
		return nil, fmt.Errorf("--workload-proofs=%d: must be at least 1", o.workloadProofs)
	}
	if err := o.timers.Validate(); err != nil {
		return nil, err
	}
	o.namespace = os.Getenv(namespaceEnv)
	if o.namespace == "" {
		return nil, fmt.Errorf("%s is not set: set it to the namespace the operator runs in (the helm chart does this)", namespaceEnv)
	}
	return o, nil
}

// metricsOptions serves metrics the way the API server's own components do:
// HTTPS, with every request's bearer token checked by the API server, so that
// reaching the port is not enough to read them.
func metricsOptions(o *options) metricsserver.Options {
	opts := metricsserver.Options{BindAddress: o.metricsAddr}
	if o.metricsSecure {
		opts.SecureServing = true
		opts.FilterProvider = metricsauth.Provider
		opts.CertDir = o.metricsCerts
		opts.TLSOpts = []func(*tls.Config){http1Only}
	}
	return opts
}

// http1Only turns HTTP/2 off on the metrics endpoint: a scrape needs none
// of it, and HTTP/2's stream handling is where the Rapid Reset and stream
// cancellation attacks (CVE-2023-44487, CVE-2023-39325) hit servers.
func http1Only(c *tls.Config) {
	c.NextProtos = []string{"http/1.1"}
}

func run(o *options) error {
	ctrl.SetLogger(zap.New(zap.UseFlagOptions(&o.zap)))
	log := ctrl.Log.WithName("setup")
	log.Info("starting gpu-operator", "version", version.Version, "namespace", o.namespace)

	// One trimmer for the nodes of the cache and those the maintenance
	// controller wrote and keeps until the cache has them: they share
	// their label strings.
	nodes := cacheconfig.NewNodeTrimmer()
	mgr, err := ctrl.NewManager(restconfig.Uncompressed(ctrl.GetConfigOrDie()), ctrl.Options{
		Scheme:                        scheme.New(),
		Cache:                         cacheconfig.Options(o.namespace, nodes),
		Client:                        cacheconfig.ClientOptions(),
		Metrics:                       metricsOptions(o),
		HealthProbeBindAddress:        o.probeAddr,
		PprofBindAddress:              o.pprofAddr,
		LeaderElection:                o.leaderElect,
		LeaderElectionID:              o.leaderElectID,
		LeaderElectionNamespace:       o.namespace,
		LeaderElectionReleaseOnCancel: true,
		LeaseDuration:                 &o.timers.LeaseDuration,
		RenewDeadline:                 &o.timers.RenewDeadline,
		RetryPeriod:                   &o.timers.RetryPeriod,
		GracefulShutdownTimeout:       ptr.To(operator.ShutdownTimeout),
		Controller:                    config.Controller{ReconciliationTimeout: operator.ReconcileTimeout},
	})
	if err != nil {
		return fmt.Errorf("creating the manager: %w", err)
	}
	m, err := metrics.New(ctrlmetrics.Registry)
	if err != nil {
		return fmt.Errorf("registering metrics: %w", err)
	}
	ctx := ctrl.SetupSignalHandler()
	if err := operator.Setup(mgr, operator.Config{
		Namespace: o.namespace, NodeWorkers: o.nodeWorkers, WorkloadProofs: o.workloadProofs, Timers: o.timers, Metrics: m, TrimNode: nodes.Node,
		InstallBindsOperandClusterRoles: o.installBinds,
	}); err != nil {
		return err
	}
	if err := mgr.AddHealthzCheck("healthz", healthz.Ping); err != nil {
		return fmt.Errorf("adding the health check: %w", err)
	}
	if err := mgr.AddReadyzCheck("readyz", healthz.Ping); err != nil {
		return fmt.Errorf("adding the readiness check: %w", err)
	}
	if err := mgr.Start(ctx); err != nil {
		return fmt.Errorf("running the manager: %w", err)
	}
	return nil
}

func main() {
	if ran, err := runSubcommand(os.Args[1:]); ran {
		if err != nil {
			fmt.Fprintln(os.Stderr, "gpu-operator:", err)
			os.Exit(1)
		}
		return
	}
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
