package escalation

import (
	"fmt"
	"os"
	"testing"

	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/gpu-operator/gpu-operator/internal/test/envtest"
)

// admin is the suite's client with every right; cfg its configuration,
// which impersonate derives an operand's from.
var (
	admin client.Client
	cfg   *rest.Config
)

func TestMain(m *testing.M) {
	env, err := envtest.Start(client.Options{Scheme: envtest.NewScheme()})
	if err != nil {
		fmt.Fprintf(os.Stderr, "test/escalation: %v\n", err)
		os.Exit(1)
	}
	admin, cfg = env.Client, env.Config
	code := m.Run()
	if err := env.Stop(); err != nil {
		fmt.Fprintf(os.Stderr, "test/escalation: stopping envtest: %v\n", err)
	}
	os.Exit(code)
}

// impersonate returns a client that acts as a ServiceAccount's token
// projected into a pod on a node: the user, groups and extra fields the
// API server gives such a token (ServiceAccountTokenPodNodeInfo).
func impersonate(t *testing.T, namespace, serviceAccount, pod, node string) client.Client {
	t.Helper()
	cl, err := client.New(impersonated(namespace, serviceAccount, pod, node), client.Options{Scheme: envtest.NewScheme()})
	if err != nil {
		t.Fatal(err)
	}
	return cl
}

// impersonated is the configuration of impersonate's client.
func impersonated(namespace, serviceAccount, pod, node string) *rest.Config {
	c := rest.CopyConfig(cfg)
	c.Impersonate = rest.ImpersonationConfig{
		UserName: "system:serviceaccount:" + namespace + ":" + serviceAccount,
		Groups:   []string{"system:serviceaccounts", "system:serviceaccounts:" + namespace, "system:authenticated"},
		Extra: map[string][]string{
			"authentication.kubernetes.io/pod-name":  {pod},
			"authentication.kubernetes.io/node-name": {node},
		},
	}
	return c
}
