//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/gpu-operator/gpu-operator/internal/test/simcluster"
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
	creations  *podCreations
	op         *operator
)

// maxProcs is how many processes the suite runs in at most: each shifts
// its ports (portOffset, operatorAddr).
const maxProcs = 9

func TestE2E(t *testing.T) {
	RegisterFailHandler(Fail)
	// The specs wait on simulated clusters whose controllers take tens of
	// milliseconds at best to act. Gomega's default, a poll every 10 ms,
	// has four processes list objects hundreds of times a second on a
	// two-core machine, slowing the very clusters they wait on.
	SetDefaultEventuallyPollingInterval(100 * time.Millisecond)
	SetDefaultConsistentlyPollingInterval(100 * time.Millisecond)
	RunSpecs(t, "gpu-operator end-to-end")
}

var _ = BeforeSuite(func(ctx SpecContext) {
	// Ten processes and more would reach the benchmark's ports (18280,
	// and SIM_PORT_OFFSET=1000 for its smoke run).
	Expect(GinkgoParallelProcess()).To(BeNumerically("<=", maxProcs), "E2E_PROCS: at most %d processes", maxProcs)
	var err error
	simDir = filepath.Join(root, "_output", "e2e", fmt.Sprintf("p%d", GinkgoParallelProcess()))
	sim, err = simcluster.Up(simcluster.Options{
		Root: root, Dir: simDir, Nodes: gpuNodes,
		Env: []string{"SIM_BROKEN_DRIVER_NODES=" + brokenNode, "SIM_NODE_KINDS=" + nodeKinds,
			"SIM_PORT_OFFSET=" + strconv.Itoa(portOffset())},
		KeepOnFailure: os.Getenv("E2E_KEEP_CLUSTER") != "",
	})
	Expect(err).NotTo(HaveOccurred())
	k8s = sim.Client
	history = watchLabels(context.Background(), k8s)
	creations = watchPodCreations(context.Background(), k8s)
}, NodeTimeout(120e9))

var _ = AfterSuite(func() {
	op.kill()
	if sim != nil && os.Getenv("E2E_KEEP_CLUSTER") == "" {
		sim.Down()
	}
})

func envInt(name string, def int) int {
	if v, err := strconv.Atoi(os.Getenv(name)); err == nil && v > 0 {
		return v
	}
	return def
}
