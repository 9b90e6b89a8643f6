package maintenance

import (
	corev1 "k8s.io/api/core/v1"

	gpuv1 "github.com/gpu-operator/gpu-operator/api/v1"
	"github.com/gpu-operator/gpu-operator/internal/driverpool"
	"github.com/gpu-operator/gpu-operator/internal/operandpods"
	"github.com/gpu-operator/gpu-operator/internal/upgrade"
)

// byHandEviction is how the GPU pods leave a node whose driver pod a
// person replaced outside the upgrade, where autoUpgrade is off: NVIDIA's
// driver manager settings (driver.manager.env), with their pod selectors.
type byHandEviction struct {
	gpuv1.ManagerEviction
	sel *podSelectors
}

// byHandEvictions reads each driver pool's driver.manager. A pool whose
// settings do not parse (stored before the API server refused them; its
// status names them) has none: its upgrade policy applies.
func byHandEvictions(pools *driverpool.Set) map[string]*byHandEviction {
	out := map[string]*byHandEviction{}
	for i := range pools.Pools {
		pool := &pools.Pools[i]
		e, err := pool.Driver.Manager.Eviction()
		if err != nil {
			continue
		}
		sel, err := parseSelectors(&e.Spec)
		if err != nil {
			continue
		}
		out[pool.Name] = &byHandEviction{ManagerEviction: e, sel: sel}
	}
	return out
}

// byHandOf is the node's pool's byHandEviction; nil where there is none.
func (p *pass) byHandOf(n *corev1.Node) *byHandEviction {
	if p.obs.pools == nil {
		return nil
	}
	return p.byHand[p.poolOf(n)]
}

// outdatedPodFate reads, on an upgrade-required node, what became of the
// outdated driver pod the upgrade was to replace (AnnotationOutdatedPod):
// replaced by a pod its DaemonSet made at its current spec, or gone with
// none in its place yet. A pod the node's wanted DaemonSet did not make,
// or not at its current spec, is neither: the upgrade goes on as it would.
func (p *pass) outdatedPodFate(n *corev1.Node) (replaced, gone bool) {
	uid := n.Annotations[AnnotationOutdatedPod]
	if stateOf(n) != gpuv1.UpgradeRequired || uid == "" {
		return false, false
	}
	pod := p.obs.driverPods[n.Name]
	switch {
	case pod == nil:
		return false, true
	case string(pod.UID) != uid && p.obs.runsCurrent(pod, n):
		return true, false
	}
	return false, false
}

// followsByHand reports whether the node's upgrade in flight, or failed,
// follows a driver pod replaced by hand. Relabelled upgrade-required by a
// person, it starts again only as a replacement by hand does
// (outdatedPodFate); any other start is a plain upgrade.
func followsByHand(n *corev1.Node) bool {
	return n.Annotations[AnnotationByHand] == gpuv1.LabelTrue && stateOf(n) != gpuv1.UpgradeRequired
}

// upgradeMarks are the annotations, besides AnnotationSince, that a node's
// upgrade writes going from state from to st (startsByHand: a start that
// follows a replacement by hand): the outdated driver pod, recorded on
// entering upgrade-required and kept there, and kept with the by-hand mark
// through an upgrade that follows a replacement by hand, to its end,
// failed included.
func upgradeMarks(n *corev1.Node, st gpuv1.UpgradeState, startsByHand bool, from gpuv1.UpgradeState, pod *operandpods.Pod) map[string]string {
	out := map[string]string{}
	recorded := n.Annotations[AnnotationOutdatedPod]
	byHand := (startsByHand || followsByHand(n)) && upgrade.Holds(st)
	switch {
	case recorded != "" && ((st == gpuv1.UpgradeRequired && from == st) || byHand):
		out[AnnotationOutdatedPod] = recorded
	case st == gpuv1.UpgradeRequired && pod != nil:
		out[AnnotationOutdatedPod] = string(pod.UID)
	}
	if byHand {
		out[AnnotationByHand] = gpuv1.LabelTrue
	}
	return out
}
