//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	apimeta "k8s.io/apimachinery/pkg/api/meta"

	gpuv1 "github.com/gpu-operator/gpu-operator/api/v1"
	gpuv1alpha1 "github.com/gpu-operator/gpu-operator/api/v1alpha1"
	"github.com/gpu-operator/gpu-operator/internal/state"
)

// PrecompiledInput names the nodes PrecompiledSpec moves to NVIDIA's
// precompiled example; the first of them boots new kernels.
type PrecompiledInput struct {
	Precompiled, Others []string
}

// PrecompiledSpec applies NVIDIA's precompiled example unchanged to some
// nodes: they move to the image built for their kernel through the
// upgrade. One node then boots a kernel NVIDIA publishes no image for (in
// the simulated registry, any reference holding "unpublished"): it keeps
// its driver, and the node and the NVIDIADriver say why. It boots a
// published one next: it moves to that image through the upgrade, alone.
func PrecompiledSpec(ctx context.Context, in PrecompiledInput) {
	all := append(append([]string{}, in.Precompiled...), in.Others...)
	AllReadySpec(ctx, AllReadyInput{Nodes: all})
	tl := watchTimeline(ctx, all)
	defer tl.stop()
	defer func() { AddReportEntry("precompiled timeline", tl.String()) }()
	rebooted := in.Precompiled[0]
	bootedWith := nodeLabelOf(ctx, rebooted, state.LabelKernelVersion)
	DeferCleanup(func(ctx SpecContext) {
		setNodeLabel(ctx, rebooted, state.LabelKernelVersion, bootedWith)
		deleteNVIDIADrivers(ctx, "demo-precomp")
	})

	tl.mark("helm upgrade --set driver.nvidiaDriverCRD.enabled=true")
	helmSet("driver.nvidiaDriverCRD.enabled=true")
	for _, n := range in.Precompiled {
		setNodeLabel(ctx, n, "driver.precompiled", "true")
		setNodeLabel(ctx, n, "driver.version", "580")
	}
	tl.mark("labelled precompiled nodes; NVIDIA's nvd-precompiled-some.yaml applied")
	applyNVIDIAExample(ctx, "nvd-precompiled-some.yaml")
	for _, n := range in.Precompiled {
		expectPrecompiledDriver(ctx, n, nodeLabelOf(ctx, n, state.LabelKernelVersion))
	}
	expectNVIDIADriver(ctx, "demo-precomp", gpuv1alpha1.StateReady, fmt.Sprintf("%d/%d", len(in.Precompiled), len(in.Precompiled)))
	waitAllReady(ctx, all)
	Expect(tl.peak(in.Precompiled)).To(Equal(1), "one node at a time:\n%s", tl)

	// A kernel without an image: the node keeps its driver, and says why.
	running := driverPods(ctx, []string{rebooted})
	unpublished := "6.8.0-1015-unpublished"
	tl.mark(rebooted + " boots kernel " + unpublished + ", which has no precompiled image")
	setNodeLabel(ctx, rebooted, state.LabelKernelVersion, unpublished)
	Eventually(func(g Gomega) {
		d := getNVIDIADriver(g, ctx, "demo-precomp")
		c := apimeta.FindStatusCondition(d.Status.Conditions, gpuv1alpha1.ConditionError)
		g.Expect(c).NotTo(BeNil())
		g.Expect(c.Reason).To(Equal(gpuv1alpha1.ReasonPrecompiledImageMissing))
		g.Expect(d.Status.Kernels).To(ContainElement(And(HaveField("Kernel", unpublished), HaveField("State", gpuv1alpha1.ImageMissing),
			HaveField("Message", ContainSubstring("ImagePullBackOff")))))
	}).WithTimeout(time.Minute).WithPolling(time.Second).Should(Succeed())
	Expect(driverPods(ctx, []string{rebooted})).To(Equal(running), "the node keeps the driver it runs")
	Expect(nodeLabelOf(ctx, rebooted, gpuv1.LabelDriverKernel)).To(Equal(bootedWith))
	tl.mark("demo-precomp says PrecompiledImageMissing; " + rebooted + " runs the same driver pod")
	Expect(tl.upgradedSince(rebooted+" boots kernel "+unpublished, rebooted)).To(BeFalse(), "no upgrade towards a missing image")

	// A published kernel: the node moves to its image through the upgrade.
	published := "5.15.0-1041-azure"
	boots := rebooted + " boots kernel " + published
	tl.mark(boots)
	setNodeLabel(ctx, rebooted, state.LabelKernelVersion, published)
	expectPrecompiledDriver(ctx, rebooted, published)
	waitAllReady(ctx, all)
	Expect(tl.upgradedSince(boots, rebooted)).To(BeTrue(), "moved through the upgrade:\n%s", tl)
	for _, n := range in.Others {
		Expect(tl.upgraded(n)).To(BeFalse(), "node %s entered the upgrade", n)
	}
	GinkgoWriter.Printf("precompiled timeline:\n%s\n", tl)
}

// expectPrecompiledDriver waits until the node runs the precompiled image
// for kernel, its upgrade done and the node uncordoned.
func expectPrecompiledDriver(ctx context.Context, n, kernel string) {
	Eventually(func(g Gomega) {
		got := node(g, ctx, n)
		g.Expect(got.Labels).To(HaveKeyWithValue(gpuv1.LabelDriverPool, "demo-precomp"))
		g.Expect(got.Labels).To(HaveKeyWithValue(gpuv1.LabelDriverKernel, kernel))
		g.Expect(got.Labels).To(HaveKeyWithValue(gpuv1.StateLabel(string(state.Driver)), "ready"))
		g.Expect(got.Spec.Unschedulable).To(BeFalse())
		p := podOn(ctx, n, string(state.Driver))
		g.Expect(p).NotTo(BeNil())
		g.Expect(p.Spec.Containers[0].Image).To(HavePrefix("nvcr.io/nvidia/driver:580-" + kernel + "-"))
		g.Expect(strings.Count(p.Spec.Containers[0].Image, kernel)).To(Equal(1))
	}).WithTimeout(5*time.Minute).WithPolling(time.Second).Should(Succeed(), "node %s, kernel %s", n, kernel)
}

func nodeLabelOf(ctx context.Context, n, key string) string {
	return node(Default, ctx, n).Labels[key]
}
