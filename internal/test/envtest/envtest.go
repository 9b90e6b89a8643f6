package envtest

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/gpu-operator/gpu-operator/internal/scheme"
	"github.com/gpu-operator/gpu-operator/internal/test/crdschema"
)

// assetsEnv is where envtest looks for kube-apiserver, etcd and kubectl.
const assetsEnv = "KUBEBUILDER_ASSETS"

// Env is a running API server with the project's CRDs installed.
type Env struct {
	Config *rest.Config
	Client client.Client
	env    *envtest.Environment
}

// Start starts etcd and kube-apiserver and installs every CRD under
// config/crd/bases. The binaries come from $KUBEBUILDER_ASSETS or, when it
// is unset, from the repository's bin/, where `make tools` puts them.
func Start(opts client.Options) (*Env, error) {
	root := crdschema.RepoRoot()
	assets := os.Getenv(assetsEnv)
	if assets == "" {
		assets = filepath.Join(root, "bin")
	}
	if _, err := os.Stat(filepath.Join(assets, "kube-apiserver")); err != nil {
		return nil, fmt.Errorf("no kube-apiserver in %s: run `make tools` (or `make test`) to build it, or set %s", assets, assetsEnv)
	}
	env := &envtest.Environment{
		CRDDirectoryPaths:     []string{filepath.Join(root, "config", "crd", "bases"), filepath.Join(root, "config", "crd", "nfd")},
		ErrorIfCRDPathMissing: true,
		BinaryAssetsDirectory: assets,
		// go test starts up to TEST_PARALLEL API servers at once on two
		// cores; one starting behind the others needs more than
		// envtest's default 20 s.
		ControlPlaneStartTimeout: time.Minute,
	}
	cfg, err := env.Start()
	if err != nil {
		return nil, fmt.Errorf("starting envtest with binaries from %s: %w", assets, err)
	}
	c, err := client.New(cfg, opts)
	if err != nil {
		_ = env.Stop()
		return nil, fmt.Errorf("creating a client: %w", err)
	}
	return &Env{Config: cfg, Client: c, env: env}, nil
}

// Stop stops the API server and etcd.
func (e *Env) Stop() error { return e.env.Stop() }

// NewScheme returns a scheme with every type the tests use: the
// operator's (internal/scheme).
func NewScheme() *runtime.Scheme { return scheme.New() }

// RunStrict starts an API server for a test package, hands setup a client
// with strict field validation (as `kubectl apply` validates), runs the
// package's tests and stops the server. It returns the exit code for
// os.Exit in TestMain.
func RunStrict(m *testing.M, suite string, setup func(client.Client) error) int {
	env, err := Start(client.Options{Scheme: NewScheme()})
	if err != nil {
		fmt.Fprintf(os.Stderr, "%s: %v\n", suite, err)
		return 1
	}
	defer func() {
		if err := env.Stop(); err != nil {
			fmt.Fprintf(os.Stderr, "%s: stopping envtest: %v\n", suite, err)
		}
	}()
	if err := setup(client.WithFieldValidation(env.Client, "Strict")); err != nil {
		fmt.Fprintf(os.Stderr, "%s: %v\n", suite, err)
		return 1
	}
	return m.Run()
}
