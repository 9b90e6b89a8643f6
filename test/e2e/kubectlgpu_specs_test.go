//go:build e2e

package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	gpuv1 "github.com/gpu-operator/gpu-operator/api/v1"
	"github.com/gpu-operator/gpu-operator/internal/explain"
	"github.com/gpu-operator/gpu-operator/internal/kubectlgpu"
)

// kubectlGPU runs kubectl gpu with args against this process's cluster,
// in process, and returns what it printed.
func kubectlGPU(ctx context.Context, args ...string) string {
	var out bytes.Buffer
	cmd := kubectlgpu.NewCommand(&out)
	cmd.SetArgs(append([]string{"--kubeconfig", sim.Kubeconfig()}, args...))
	Expect(cmd.ExecuteContext(ctx)).To(Succeed(), "kubectl gpu %v", args)
	return out.String()
}

// KubectlGPUSpec asks kubectl gpu about the fleet and about a node whose
// driver never loads: why names the driver first in the chain, not
// ready, with the operator's reason; status counts the GPU nodes and the
// ready ones as the ClusterPolicy does.
func KubectlGPUSpec(ctx context.Context, broken, readyNodes string) {
	By("kubectl gpu why " + broken)
	text := kubectlGPU(ctx, "why", broken)
	AddReportEntry("kubectl gpu why "+broken, text)
	var n explain.Node
	Expect(json.Unmarshal([]byte(kubectlGPU(ctx, "why", broken, "-o", "json")), &n)).To(Succeed())
	Expect(n.GPUNode).To(BeTrue())
	Expect(n.States).NotTo(BeEmpty())
	Expect(n.States[0].Name).To(Equal("driver"), "the chain's order")
	Expect(n.States[0].Value).NotTo(Equal(string(gpuv1.StateReady)))
	Expect(n.States[0].Reason).NotTo(BeEmpty(), "the operator's reason")
	Expect(text).To(And(ContainSubstring("States, in order:"), ContainSubstring(n.States[0].Reason)))

	By("kubectl gpu status")
	AddReportEntry("kubectl gpu status", kubectlGPU(ctx, "status"))
	var f explain.Fleet
	Expect(json.Unmarshal([]byte(kubectlGPU(ctx, "status", "-o", "json")), &f)).To(Succeed())
	Expect(fmt.Sprintf("%d/%d", f.Ready, f.GPUNodes)).To(Equal(readyNodes), "as the ClusterPolicy counts them")
}
