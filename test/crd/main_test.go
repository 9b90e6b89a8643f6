package crd

import (
	"os"
	"testing"

	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/gpu-operator/gpu-operator/internal/test/envtest"
)

// k8sClient talks to the suite's API server with strict field validation,
// as `kubectl apply` does by default.
var k8sClient client.Client

func TestMain(m *testing.M) {
	os.Exit(envtest.RunStrict(m, "test/crd", func(c client.Client) error {
		k8sClient = c
		return nil
	}))
}
