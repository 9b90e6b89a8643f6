package simcluster

import (
	"fmt"
	"io"
	"os"
	"path/filepath"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"

	gpuv1 "github.com/gpu-operator/gpu-operator/api/v1"
	gpuv1alpha1 "github.com/gpu-operator/gpu-operator/api/v1alpha1"
)

// Options say which simulated cluster to start and how to talk to it.
type Options struct {
	// Root is the repository root: scripts and binaries are named
	// relative to it, and run from it.
	Root string
	// Dir is the cluster's state directory (SIM_DIR): kubeconfig, PKI,
	// logs/, pids. Each user has its own, so that one's leftovers never
	// meet another's cluster; up.sh empties it.
	Dir string
	// Nodes is the number of fake GPU nodes.
	Nodes int
	// Env is added to the environment of every script the cluster runs,
	// up.sh's first: SIM_BROKEN_DRIVER_NODES, SIM_NODE_KINDS and the like
	// (see hack/sim/up.sh). Later scripts see it too, as they would in a
	// shell that exported it.
	Env []string
	// AuditOperator turns on the API server's audit log (AuditLog) for the
	// operator's ServiceAccount and nobody else, so that the log holds the
	// operator's requests alone and stays small at scale.
	AuditOperator bool
	// Log receives what the scripts print; nil discards it.
	Log io.Writer
	// QPS and Burst limit the clients; 0 keeps client-go's defaults. The
	// simulated API server runs without rate limits, so a client that
	// creates tens of thousands of objects should not add one.
	QPS   float32
	Burst int
	// KeepOnFailure leaves a cluster that failed to start running, so
	// that its logs can be read; otherwise Up tears it down, so that no
	// half-started process keeps holding the cluster's ports.
	KeepOnFailure bool
}

// Cluster is one running simulated cluster and clients of it as its
// administrator.
type Cluster struct {
	// Root and Dir are the Options'.
	Root, Dir string
	// Config is the administrator's, with the certificates loaded (see
	// Up).
	Config *rest.Config
	// Client reads, writes and watches client-go's and the operator's
	// types.
	Client client.WithWatch
	// Clientset is for what Client does not do: subresources, discovery,
	// paginated lists.
	Clientset kubernetes.Interface

	env []string
	log io.Writer
}

// Up tears down whatever cluster Dir held (a run interrupted before its
// teardown), starts a fresh one with hack/sim/up.sh and connects to it.
func Up(o Options) (*Cluster, error) {
	c := &Cluster{Root: o.Root, Dir: o.Dir, env: o.Env, log: o.Log}
	if c.log == nil {
		c.log = io.Discard
	}
	c.Down()
	if o.AuditOperator {
		// Beside Dir, not in it: up.sh empties Dir before it starts.
		policy := filepath.Join(filepath.Dir(o.Dir), "audit-policy.yaml")
		if err := os.MkdirAll(filepath.Dir(policy), 0o755); err != nil {
			return nil, err
		}
		if err := os.WriteFile(policy, []byte(operatorAuditPolicy), 0o644); err != nil {
			return nil, err
		}
		c.env = append(c.env[:len(c.env):len(c.env)], "SIM_AUDIT_POLICY="+policy)
	}
	out, err := c.Run("hack/sim/up.sh", fmt.Sprint(o.Nodes))
	if err != nil {
		// up.sh says why (a port in use, a tool missing, a process that
		// never came up): the error carries it, for a caller without a log.
		err = fmt.Errorf("%w\n%s", err, out)
	} else {
		err = c.connect(o)
	}
	if err != nil {
		if !o.KeepOnFailure {
			c.Down()
		}
		return nil, err
	}
	return c, nil
}

// connect builds the clients from the kubeconfig up.sh wrote.
func (c *Cluster) connect(o Options) error {
	cfg, err := clientcmd.BuildConfigFromFlags("", c.Kubeconfig())
	if err != nil {
		return fmt.Errorf("reading the simulated cluster's kubeconfig: %w", err)
	}
	// client-go caches TLS transports by certificate file path; every
	// cluster started at Dir has a new CA at the same path, so the
	// certificates are loaded here and the paths forgotten.
	if err := rest.LoadTLSFiles(cfg); err != nil {
		return fmt.Errorf("loading the simulated cluster's certificates: %w", err)
	}
	cfg.CAFile, cfg.CertFile, cfg.KeyFile = "", "", ""
	if o.QPS > 0 {
		cfg.QPS = o.QPS
	}
	if o.Burst > 0 {
		cfg.Burst = o.Burst
	}
	if c.Clientset, err = kubernetes.NewForConfig(cfg); err != nil {
		return err
	}
	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		return err
	}
	if err := gpuv1.AddToScheme(scheme); err != nil {
		return err
	}
	if err := gpuv1alpha1.AddToScheme(scheme); err != nil {
		return err
	}
	if c.Client, err = client.NewWithWatch(cfg, client.Options{Scheme: scheme}); err != nil {
		return err
	}
	c.Config = cfg
	return nil
}

// Down stops every process of the cluster and removes Dir. What down.sh
// says, a failure included, goes to the log: a teardown has nobody else
// to tell, and the next Up runs it again.
func (c *Cluster) Down() { _, _ = c.Run("hack/sim/down.sh") }

// Kubeconfig is the path of the administrator's kubeconfig.
func (c *Cluster) Kubeconfig() string { return filepath.Join(c.Dir, "kubeconfig") }

// AuditLog is the path of the API server's audit log, written with
// Options.AuditOperator.
func (c *Cluster) AuditLog() string { return filepath.Join(c.Dir, "audit.log") }

// LogFile is the path of a process's log, logs/NAME.log, where up.sh
// writes those it starts.
func (c *Cluster) LogFile(name string) string { return filepath.Join(c.Dir, "logs", name+".log") }
