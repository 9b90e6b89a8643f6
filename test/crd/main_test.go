package crd

import (
	"fmt"
	"os"
	"testing"

	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"

	gpuv1 "github.com/gpu-operator/gpu-operator/api/v1"
	"github.com/gpu-operator/gpu-operator/internal/test/envtest"
)

// k8sClient talks to the suite's API server with strict field validation,
// as `kubectl apply` does by default.
var k8sClient client.Client

func TestMain(m *testing.M) {
	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		panic(err)
	}
	if err := gpuv1.AddToScheme(scheme); err != nil {
		panic(err)
	}
	env, err := envtest.Start(client.Options{Scheme: scheme})
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
