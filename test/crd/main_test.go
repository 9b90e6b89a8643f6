package crd

import (
	"fmt"
	"os"
	"testing"

	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/gpu-operator/gpu-operator/internal/test/envtest"
)

// k8sClient talks to the suite's API server with strict field validation,
// as `kubectl apply` does by default.
var k8sClient client.Client

func TestMain(m *testing.M) {
	env, err := envtest.Start(client.Options{Scheme: envtest.NewScheme()})
	if err != nil {
		fmt.Fprintln(os.Stderr, "test/crd:", err)
		os.Exit(1)
	}
	k8sClient = client.WithFieldValidation(env.Client, "Strict")
	code := m.Run()
	if err := env.Stop(); err != nil {
		fmt.Fprintln(os.Stderr, "test/crd: stopping envtest:", err)
	}
	os.Exit(code)
}
