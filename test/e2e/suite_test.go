//go:build e2e

package e2e

import (
	"context"
	"os"
	"strconv"
	"testing"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"

	gpuv1 "github.com/gpu-operator/gpu-operator/api/v1"
)

// The cluster every spec shares: GPU nodes gpu-node-0..N-1, of which the
// last one's driver never becomes ready, and one node of each extra kind
// (realnode_specs_test.go): a host with its own driver, CRI-O, k3s, and a
// runtime that never loads the NVIDIA handler.
var (
	gpuNodes   = envInt("E2E_NODES", 5)
	brokenNode = "gpu-node-" + strconv.Itoa(gpuNodes-1)
	k8s        client.WithWatch
	history    *labelHistory
	op         *operator
)

func TestE2E(t *testing.T) {
	RegisterFailHandler(Fail)
	RunSpecs(t, "gpu-operator end-to-end")
}

var _ = BeforeSuite(func(ctx SpecContext) {
	_, _ = sh("hack/sim/down.sh")
	os.Setenv("SIM_BROKEN_DRIVER_NODES", brokenNode)
	os.Setenv("SIM_NODE_KINDS", nodeKinds)
	_, err := sh("hack/sim/up.sh", strconv.Itoa(gpuNodes))
	Expect(err).NotTo(HaveOccurred())

	cfg, err := clientcmd.BuildConfigFromFlags("", simDir+"/kubeconfig")
	Expect(err).NotTo(HaveOccurred())
	scheme := runtime.NewScheme()
	Expect(clientgoscheme.AddToScheme(scheme)).To(Succeed())
	Expect(gpuv1.AddToScheme(scheme)).To(Succeed())
	k8s, err = client.NewWithWatch(cfg, client.Options{Scheme: scheme})
	Expect(err).NotTo(HaveOccurred())
	history = watchLabels(context.Background(), k8s)
}, NodeTimeout(120e9))

var _ = AfterSuite(func() {
	op.kill()
	if os.Getenv("E2E_KEEP_CLUSTER") == "" {
		_, _ = sh("hack/sim/down.sh")
	}
})

func envInt(name string, def int) int {
	if v, err := strconv.Atoi(os.Getenv(name)); err == nil && v > 0 {
		return v
	}
	return def
}
