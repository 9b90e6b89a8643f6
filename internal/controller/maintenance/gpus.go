package maintenance

import (
	corev1 "k8s.io/api/core/v1"

	gpuv1 "github.com/gpu-operator/gpu-operator/api/v1"
	"github.com/gpu-operator/gpu-operator/internal/gating"
	"github.com/gpu-operator/gpu-operator/internal/state"
)

// nodeGPUs is what the plugin of a node's allocation mode says of its GPUs:
// how many it registered, and how many of those workloads may have.
type nodeGPUs struct {
	// plugin is the state of the node's plugin: the device plugin, or the
	// DRA driver on a node in allocation mode dra.
	plugin state.Name
	// registered and usable: the device plugin's capacity and
	// allocatable, or the GPUs the DRA driver's slices name and those of
	// them no device taint keeps workloads off.
	registered, usable int64
	// known is false where the DRA driver's slices cannot be read (the
	// API is not served, or not listed yet).
	known bool
}

// gpusOf reads a node's GPUs from the plugin of its allocation mode.
func (r *Reconciler) gpusOf(n *corev1.Node) nodeGPUs {
	if gating.AllocationModeOf(n) != gpuv1.AllocationDRA {
		return nodeGPUs{plugin: state.DevicePlugin, registered: gpuTotal(n.Status.Capacity),
			usable: gpuTotal(n.Status.Allocatable), known: true}
	}
	g := nodeGPUs{plugin: state.DRADriver}
	if r.Slices == nil {
		return g
	}
	slices, err := r.Slices.OnNode(n.Name)
	if err != nil || !slices.Complete() {
		// Not listed yet, or a pool being published: a part of the
		// node's GPUs would read as lost.
		return g
	}
	tainted, _ := gating.UnhealthyDRAGPUs(slices)
	g.registered, g.usable, g.known = int64(slices.GPUs), int64(slices.GPUs)-tainted, true
	return g
}

// unhealthy is how many registered GPUs workloads may not have.
func (g nodeGPUs) unhealthy() int64 { return g.registered - g.usable }
