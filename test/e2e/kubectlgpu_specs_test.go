//go:build e2e

package e2e

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

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
// ready ones as the ClusterPolicy does; plan reads the budgets; must-gather
// picks the broken node for its operand pods and holds what support
// reads first.
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

	By("kubectl gpu plan")
	var plan explain.Plan
	Expect(json.Unmarshal([]byte(kubectlGPU(ctx, "plan", "-o", "json")), &plan)).To(Succeed())
	AddReportEntry("kubectl gpu plan", kubectlGPU(ctx, "plan"))
	Expect(plan.Budgets).To(ContainElement(HavePrefix("driver.upgradePolicy.maxParallelUpgrades=")))

	By("kubectl gpu must-gather")
	file := filepath.Join(GinkgoT().TempDir(), "gather.tar.gz")
	text = kubectlGPU(ctx, "must-gather", "-o", file, "--max-nodes", "10")
	AddReportEntry("kubectl gpu must-gather", text)
	Expect(text).To(MatchRegexp("Operand pods' logs of [^(]*"+broken), "the nodes not ready, chosen by themselves")
	files := archiveFiles(file)
	Expect(files).To(ContainElements("cluster/clusterpolicies.yaml", "nodes.yaml", "namespace/daemonsets.yaml",
		"events/nodes.yaml", "manifest.json"))
	Expect(files).To(ContainElement(HavePrefix("logs/"+broken+"/")), "the broken node's operand pods")
	Expect(files).NotTo(ContainElement(ContainSubstring("secret")))
}

// archiveFiles lists must-gather's files, without their directory.
func archiveFiles(file string) []string {
	f, err := os.Open(file)
	Expect(err).NotTo(HaveOccurred())
	defer f.Close()
	gz, err := gzip.NewReader(f)
	Expect(err).NotTo(HaveOccurred())
	var names []string
	tr := tar.NewReader(gz)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return names
		}
		Expect(err).NotTo(HaveOccurred())
		_, name, _ := strings.Cut(h.Name, "/")
		names = append(names, name)
	}
}
