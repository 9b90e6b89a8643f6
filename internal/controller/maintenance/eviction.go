package maintenance

import (
	"context"

	corev1 "k8s.io/api/core/v1"

	"github.com/gpu-operator/gpu-operator/internal/arbiter"
)

// eviction is one eviction an operation asks of a node: the pods keep
// selects, and whether those without a controller (force) or with
// emptyDir volumes (deleteEmptyDir) go. The machines' actions and
// kubectl gpu plan read it from here, so a plan shows what a step does.
type eviction struct {
	keep                  func(*corev1.Pod) bool
	force, deleteEmptyDir *bool
}

// gpuPodEviction is the eviction of the GPU pods that op's step asks of
// n. A driver upgrade and a mode switch evict by the node's driver pool's
// settings; a repair and a MIG reconfiguration by the policy's (issue 52,
// finding 5, is to make them one).
func (p *pass) gpuPodEviction(ctx context.Context, n *corev1.Node, op arbiter.Operation) eviction {
	switch op {
	case arbiter.DriverUpgrade:
		spec, sel := p.evictionSpec(n)
		return eviction{p.r.isGPUPod(ctx, p.cp, sel.gpuExtra), spec.PodDeletion.Force, spec.PodDeletion.DeleteEmptyDir}
	case arbiter.ModeSwitch:
		spec := p.upgradeSpec(n)
		return eviction{p.r.holdsGPUAcrossSwitch(ctx, p.cp, p.selectors(n).gpuExtra), spec.PodDeletion.Force,
			spec.PodDeletion.DeleteEmptyDir}
	default:
		del := p.cp.Spec.Driver.UpgradePolicy.PodDeletion
		return eviction{p.r.isGPUPod(ctx, p.cp, p.sel.gpuExtra), del.Force, del.DeleteEmptyDir}
	}
}

// drainEviction is a driver upgrade's drain of n, and whether its pool's
// policy drains at all.
func (p *pass) drainEviction(n *corev1.Node) (eviction, bool) {
	spec, sel := p.evictionSpec(n)
	return eviction{p.r.isDrainable(sel.drain), spec.Drain.Force, spec.Drain.DeleteEmptyDir}, p.upgradePolicy(n).DrainEnabled
}
