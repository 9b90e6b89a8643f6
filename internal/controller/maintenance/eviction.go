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
// n, and keep is what its facts count while they leave: one policy for
// every operation (issue 52, finding 5). The settings and selectors are
// the node's driver pool's (its NVIDIADriver's where one selects it,
// else the policy's); a driver upgrade of a node whose driver pod a
// person replaced takes driver.manager's. DaemonSet pods that hold a
// GPU go where the operation taints the node (a repair, a MIG change, a
// mode switch): their controller does not put back a pod that does not
// tolerate the taint, and one left would hold the GPU through
// mig-manager's apply or the plugins' change. One that tolerates the
// taint comes back and is counted again: the step fails at its timeout,
// saying so, rather than go on with the GPU held. A driver upgrade only
// cordons, which DaemonSets ignore: evicting them would free nothing.
func (p *pass) gpuPodEviction(ctx context.Context, n *corev1.Node, op arbiter.Operation) eviction {
	spec, sel := p.upgradeSpec(n), p.selectors(n)
	if op == arbiter.DriverUpgrade {
		spec, sel = p.evictionSpec(n)
	}
	return eviction{p.r.gpuPods(ctx, p.cp, sel.gpuExtra, op != arbiter.DriverUpgrade), spec.PodDeletion.Force,
		spec.PodDeletion.DeleteEmptyDir}
}

// drainEviction is a driver upgrade's drain of n, and whether its pool's
// policy drains at all.
func (p *pass) drainEviction(n *corev1.Node) (eviction, bool) {
	spec, sel := p.evictionSpec(n)
	return eviction{p.r.isDrainable(sel.drain), spec.Drain.Force, spec.Drain.DeleteEmptyDir}, p.upgradePolicy(n).DrainEnabled
}
