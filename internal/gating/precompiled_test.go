package gating

import (
	"testing"

	. "github.com/onsi/gomega"

	gpuv1 "github.com/gpu-operator/gpu-operator/api/v1"
)

// A node of a precompiled pool booted into a new kernel gets that kernel's
// driver through the upgrade: its kernel label, which gates the per-kernel
// DaemonSets, moves by the pool label's rule.
func TestKernelLabelMovesOnlyWithTheUpgrade(t *testing.T) {
	expectMovesOnlyWithTheUpgrade(t, gpuv1.LabelDriverKernel, "6.8.0-1008", "6.8.0-1009",
		func(in *Input) { in.DriverKernel = "6.8.0-1009" })

	// Into a precompiled pool from another, and out of one, the label
	// moves with the pool label: with the driver it describes.
	g := NewWithT(t)
	n, pods := readyNode()
	n.Labels[gpuv1.LabelDriverPool] = "compiled"
	joins := func(in *Input) { in.DriverPool, in.DriverKernel = "precompiled", "6.8.0-1009" }
	g.Expect(decide(t, n, pods, joins).Labels).NotTo(HaveKey(gpuv1.LabelDriverKernel), "the compiled pool's driver still runs")
	n.Labels[gpuv1.LabelUpgradeState] = string(gpuv1.UpgradePodRestart)
	r := decide(t, n, pods, joins)
	g.Expect(r.Labels).To(HaveKeyWithValue(gpuv1.LabelDriverPool, "precompiled"))
	g.Expect(r.Labels).To(HaveKeyWithValue(gpuv1.LabelDriverKernel, "6.8.0-1009"))

	// Out of a precompiled pool the label goes with the driver it gated.
	n, pods = readyNode()
	n.Labels[gpuv1.LabelDriverKernel] = "6.8.0-1008"
	g.Expect(decide(t, n, pods).Labels).To(HaveKeyWithValue(gpuv1.LabelDriverKernel, "6.8.0-1008"))
	delete(pods, drv)
	g.Expect(decide(t, n, pods).Labels).NotTo(HaveKey(gpuv1.LabelDriverKernel))
}

// A node whose kernel has no precompiled image, and no driver, says so in
// its driver state: failed once the image is known missing, pending while
// it is checked. A node that runs a driver keeps it, and its state.
func TestNodeWithoutItsKernelsImageSaysSo(t *testing.T) {
	g := NewWithT(t)
	missing := func(in *Input) {
		in.DriverAwaitsImage, in.DriverImageMissing = "no precompiled driver image for kernel 6.8.0-1009: ...", true
	}
	checking := func(in *Input) { in.DriverAwaitsImage = "checking that the precompiled driver image ... can be pulled" }

	n, pods := readyNode()
	delete(pods, drv)
	r := decide(t, n, pods, missing)
	g.Expect(stateOf(r, drv)).To(Equal("failed"))
	g.Expect(r.Why[drv]).To(HavePrefix("no precompiled driver image for kernel 6.8.0-1009"))
	g.Expect(r.Events).To(ContainElement(HaveField("Reason", "StateFailed")))
	r = decide(t, n, pods, checking)
	g.Expect(stateOf(r, drv)).To(Equal("pending"))
	g.Expect(r.Why[drv]).To(HavePrefix("checking that the precompiled driver image"))

	n, pods = readyNode()
	g.Expect(stateOf(decide(t, n, pods, missing), drv)).To(Equal("ready"), "the driver it runs is kept")
}
