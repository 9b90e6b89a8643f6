package maintenance

import (
	corev1 "k8s.io/api/core/v1"

	gpuv1 "github.com/gpu-operator/gpu-operator/api/v1"
	"github.com/gpu-operator/gpu-operator/internal/migreconfig"
	"github.com/gpu-operator/gpu-operator/internal/modeswitch"
	"github.com/gpu-operator/gpu-operator/internal/remediation"
	"github.com/gpu-operator/gpu-operator/internal/upgrade"
)

// hold is what a node keeps while any operation holds it, written by each
// operation's state write in the same request, so that the hold costs no
// write of its own. Server-side apply shares the annotations among the
// operations' field owners: they go with the last operation that holds the
// node.
type hold struct {
	// domain is the node's NVLink domain: GPU feature discovery's label
	// goes with its pod, which the operation may take off the node, and
	// the domain cap must still count the node in its domain.
	domain string
	// pool is the driver pool the node was taken under (issue 52,
	// finding 6): its budgets, timeouts and eviction settings stay that
	// pool's until the node is let go, whatever NVIDIADriver selects the
	// node meanwhile. Its old pool would otherwise admit another node,
	// and the operation would change its drain settings halfway.
	pool string
}

// holdOf is what the node keeps while it is held: what it already keeps,
// else the node's domain and pool now.
func (p *pass) holdOf(n *corev1.Node) hold {
	return hold{domain: domainOf(n), pool: p.poolOf(n)}
}

// mark adds the hold's annotations to an operation's state write while
// the operation holds the node.
func (h hold) mark(annotations map[string]string, holds bool) {
	if !holds {
		return
	}
	if h.domain != "" {
		annotations[gpuv1.AnnotationNVLinkDomain] = h.domain
	}
	if h.pool != "" {
		annotations[gpuv1.AnnotationMaintenancePool] = h.pool
	}
}

// poolOf is the driver pool the node's operations count in and take their
// settings from: the one it was taken under while an operation holds it
// and that pool still exists, else the one that selects it now. A kept
// pool on a node nothing holds (a person relabelled a failed upgrade's
// node to retry it, or removed an operation's state label) is stale: the
// next hold keeps the pool of its start.
func (p *pass) poolOf(n *corev1.Node) string {
	if kept := n.Annotations[gpuv1.AnnotationMaintenancePool]; kept != "" && Held(n) && p.obs.pools.Pool(kept) != nil {
		return kept
	}
	return p.obs.pools.Assign(n.Name, n.Labels).Pool
}

// holdMark is one operation's mark on a node: whether its state label
// holds the node, and the since annotation this operator writes with it.
type holdMark struct {
	holds bool
	since string
}

// holdMarks are the node's marks of each operation, in the states in which
// each operation writes the hold's marks.
func holdMarks(n *corev1.Node) [4]holdMark {
	return [4]holdMark{
		{upgrade.Holds(stateOf(n)), AnnotationSince},
		{remediation.Tainted(remediationStateOf(n)), AnnotationRemediationSince},
		{migreconfig.Tainted(migStateOf(n)), AnnotationMIGSince},
		{modeswitch.Tainted(switchStateOf(n)), AnnotationSwitchSince},
	}
}

// heldByOwnMarks reports whether this operator's marks of an operation
// still hold the node: a holding state label with the since annotation
// this operator writes with it, which its forget removes. A state label
// another operator (NVIDIA's shares the upgrade's) or a person left
// alone holds nothing of this operator's, and its forget cannot remove
// what it does not own.
func heldByOwnMarks(n *corev1.Node) bool {
	for _, m := range holdMarks(n) {
		if m.holds && n.Annotations[m.since] != "" {
			return true
		}
	}
	return false
}

// Held reports whether an operation holds the node, by its state labels:
// the states in which each operation writes the hold's marks.
func Held(n *corev1.Node) bool {
	for _, m := range holdMarks(n) {
		if m.holds {
			return true
		}
	}
	return false
}
