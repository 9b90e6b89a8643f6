package maintenance

import (
	"context"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	gpuv1 "github.com/gpu-operator/gpu-operator/api/v1"
	"github.com/gpu-operator/gpu-operator/internal/arbiter"
	"github.com/gpu-operator/gpu-operator/internal/driverpool"
)

// Issue 52, finding 6: a node keeps the driver pool it was taken under
// until its operation lets it go. Here x's upgrade holds it in pool a100
// when a person relabels it into h100. Before, x then counted in h100: a100
// admitted y beside it (two upgrades where maxParallelUpgrades is 1), h100
// held z back, and x's drain settings became h100's halfway.
func TestANodeKeepsThePoolItWasTakenUnder(t *testing.T) {
	g := NewWithT(t)
	cp := &gpuv1.ClusterPolicy{}
	cp.Spec.Driver.Enabled = ptr.To(true)
	cp.Spec.Driver.UpgradePolicy.MaxUnavailable = ptr.To(intstr.FromString("100%"))
	cp.Spec.Driver.NodePools = []gpuv1.DriverNodePool{
		{Name: "a100", NodeSelector: map[string]gpuv1.LabelValue{"gpu": "a100"}},
		{Name: "h100", NodeSelector: map[string]gpuv1.LabelValue{"gpu": "h100"}},
	}
	p := &pass{cp: cp, obs: &observed{pools: driverpool.FromPolicy(cp)}, machines: []machine{&upgrades{}}}
	t0 := time.Date(2026, 12, 7, 6, 0, 0, 0, time.UTC)
	node := func(name, gpu string, st gpuv1.UpgradeState, since time.Time, kept string) *corev1.Node {
		annotations := map[string]string{AnnotationSince: since.Format(time.RFC3339)}
		if kept != "" {
			annotations[gpuv1.AnnotationMaintenancePool] = kept
		}
		return gpuNode(name, map[string]string{"gpu": gpu, gpuv1.LabelUpgradeState: string(st)}, annotations)
	}
	x := node("x", "h100", gpuv1.UpgradeDrainRequired, t0, "a100")
	y := node("y", "a100", gpuv1.UpgradeRequired, t0.Add(time.Second), "")
	z := node("z", "h100", gpuv1.UpgradeRequired, t0.Add(2*time.Second), "")

	ctx := context.Background()
	views := []arbiter.Node{p.view(ctx, x), p.view(ctx, y), p.view(ctx, z)}
	g.Expect(views[0].Pool).To(Equal("a100"), "x counts in the pool it was taken under")
	admission, errs := arbiter.Admit(views, budgetsOf(cp, p.obs.pools))
	g.Expect(errs).To(BeEmpty())
	g.Expect(admission.Admitted).To(HaveKey("z"))
	g.Expect(admission.Admitted).NotTo(HaveKey("y"), "a100's one place is x's")
	g.Expect(admission.Waiting["y"]).To(ContainSubstring("maxParallelUpgrades"))

	// The first write of a hold keeps the pool the node is in now; a
	// later one keeps the pool kept.
	for n, want := range map[*corev1.Node]string{z: "h100", x: "a100"} {
		a := map[string]string{}
		p.holdOf(n).mark(a, true)
		g.Expect(a).To(HaveKeyWithValue(gpuv1.AnnotationMaintenancePool, want), "node %s", n.Name)
	}
	a := map[string]string{}
	p.holdOf(x).mark(a, false)
	g.Expect(a).To(BeEmpty(), "a write that lets the node go drops the hold")

	// A pool gone meanwhile (its NVIDIADriver deleted) has no settings
	// left to keep: the node counts where it is now.
	x.Annotations[gpuv1.AnnotationMaintenancePool] = "gone"
	g.Expect(p.poolOf(x)).To(Equal("h100"))

	// A kept pool on a node nothing holds is stale: a failed upgrade's
	// node moved to h100 and relabelled upgrade-required to retry counts
	// in h100, and its retry keeps h100.
	x.Annotations[gpuv1.AnnotationMaintenancePool] = "a100"
	x.Labels[gpuv1.LabelUpgradeState] = string(gpuv1.UpgradeFailed)
	g.Expect(p.poolOf(x)).To(Equal("a100"), "the failed upgrade still holds it")
	x.Labels[gpuv1.LabelUpgradeState] = string(gpuv1.UpgradeRequired)
	g.Expect(p.poolOf(x)).To(Equal("h100"))
	g.Expect(p.view(ctx, x).Pool).To(Equal("h100"))
}
