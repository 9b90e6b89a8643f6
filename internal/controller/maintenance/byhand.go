package maintenance

import (
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"

	gpuv1 "github.com/gpu-operator/gpu-operator/api/v1"
	"github.com/gpu-operator/gpu-operator/internal/driverpool"
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
	return p.byHand[p.obs.pools.Assign(n.Name, n.Labels).Pool]
}

// byHandPolicy is the timeouts of a byHandEviction as the transition
// table reads them.
func byHandPolicy(b *byHandEviction) (podDeletion time.Duration, drain bool, drainTimeout time.Duration) {
	seconds := func(v *int32) time.Duration {
		if v == nil {
			return 0
		}
		return time.Duration(*v) * time.Second
	}
	return seconds(b.Spec.PodDeletion.TimeoutSeconds), *b.Spec.Drain.Enable, seconds(b.Spec.Drain.TimeoutSeconds)
}

// replacedByHand reports whether an upgrade-required node's outdated
// driver pod was replaced outside the upgrade by a current one.
func (p *pass) replacedByHand(n *corev1.Node) bool {
	replaced, _, _ := p.outdatedPodFate(n)
	return replaced
}

// outdatedPodFate reads, on an upgrade-required node, what became of the
// outdated driver pod the upgrade was to replace: replaced by a current pod
// (and whether across a reboot), or gone with none in its place yet.
func (p *pass) outdatedPodFate(n *corev1.Node) (replaced, rebooted, gone bool) {
	uid, boot, ok := strings.Cut(n.Annotations[AnnotationOutdatedPod], "/")
	if stateOf(n) != gpuv1.UpgradeRequired || !ok || uid == "" {
		return false, false, false
	}
	pod := p.obs.driverPods[n.Name]
	switch {
	case pod == nil:
		return false, false, true
	case string(pod.UID) != uid && !p.obs.outdated(pod, n):
		return true, boot != n.Status.NodeInfo.BootID, false
	}
	return false, false, false
}
