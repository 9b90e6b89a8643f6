package gating

import (
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"

	"github.com/gpu-operator/gpu-operator/internal/state"
)

// GFD's labels whose presence shows that GPU feature discovery labelled the
// node (through NFD).
var gfdLabels = []string{"nvidia.com/gpu.product", "nvidia.com/gpu.count"}

// IsGPUResource reports whether a resource is one the device plugin
// advertises: nvidia.com/gpu, nvidia.com/gpu.shared when time-slicing
// renames it, nvidia.com/mig-<profile> under MIG. Other nvidia.com/
// resources (the Network Operator's RDMA devices) are not the plugin's.
func IsGPUResource(name corev1.ResourceName) bool {
	s := string(name)
	return s == "nvidia.com/gpu" || strings.HasPrefix(s, "nvidia.com/gpu.") || strings.HasPrefix(s, "nvidia.com/mig-")
}

// RequestsNVIDIAResource reports whether any of a pod's containers asks
// for an nvidia.com/ resource: one the device plugin (or another NVIDIA
// plugin) allocates to it, so the pod holds a device on its node.
func RequestsNVIDIAResource(p *corev1.Pod) bool {
	for _, c := range append(append([]corev1.Container{}, p.Spec.InitContainers...), p.Spec.Containers...) {
		for _, l := range []corev1.ResourceList{c.Resources.Limits, c.Resources.Requests} {
			for name := range l {
				if strings.HasPrefix(string(name), "nvidia.com/") {
					return true
				}
			}
		}
	}
	return false
}

// GPUResources is a resource list's GPU resources, as counts: what the
// device plugin's proof of function and a driver upgrade's validation read,
// so that a node event that changes none of them can be told apart.
func GPUResources(l corev1.ResourceList) map[corev1.ResourceName]int64 {
	out := map[corev1.ResourceName]int64{}
	for name, q := range l {
		if IsGPUResource(name) {
			out[name] = q.Value()
		}
	}
	return out
}

// advertises reports whether a resource list holds a GPU resource with a
// count above zero.
func advertises(l corev1.ResourceList) bool {
	for res, q := range l {
		if IsGPUResource(res) && !q.IsZero() {
			return true
		}
	}
	return false
}

// unproven says why a state whose pod is ready does not yet do its job on
// the node, read from the node the operator already caches; "" when its
// proof holds. The driver's and the toolkit's containers prove themselves
// by their probes (nvidia-smi answers; the runtime's config names the
// NVIDIA runtime), which make their pods ready.
func (d *decision) unproven(name state.Name) string {
	n := d.in.Node
	switch name {
	case state.ContainerToolkit:
		return d.handlerMissing()
	case state.DRADriver:
		return d.draUnproven(false)
	case state.DevicePlugin:
		if !advertises(n.Status.Allocatable) {
			return "the device plugin runs, but the node advertises no GPU (nvidia.com/gpu or nvidia.com/mig-*)"
		}
	case state.GPUFeatureDiscovery:
		for _, l := range gfdLabels {
			if _, ok := n.Labels[l]; !ok {
				return fmt.Sprintf("GPU feature discovery runs, but the node has no %s label yet (NFD puts GFD's labels on the node)", l)
			}
		}
	}
	return ""
}

// stillProven is the proof a ready state keeps: the same, except that the
// device plugin only needs its GPUs registered (capacity), healthy or not.
// Unhealthy GPUs lower allocatable; tearing down the exporter that reports
// them would be the wrong answer (and unhealthy GPUs are remediated, not
// ungated).
func (d *decision) stillProven(name state.Name) string {
	if name == state.DRADriver {
		return d.draUnproven(true)
	}
	if name == state.DevicePlugin {
		if advertises(d.in.Node.Status.Capacity) {
			return ""
		}
		return "the device plugin runs, but the node has no GPU registered (nvidia.com/gpu or nvidia.com/mig-* capacity)"
	}
	return d.unproven(name)
}

// handlerMissing says why the runtime has not loaded the NVIDIA runtime
// handler. Kubelets of 1.31 and later list the handlers their runtime
// reports (containerd 2.0 and later report them): there the toolkit is
// ready only once the runtime restarted with the handler the RuntimeClass
// names. A node that lists no handlers proves nothing either way, and the
// toolkit's probe stands alone.
func (d *decision) handlerMissing() string {
	if !state.HasRuntimeHandler(&d.in.Policy.Spec, d.variant.Runtime) {
		// With NRI the toolkit registers no handler: it injects GPUs.
		return ""
	}
	handlers := d.in.Node.Status.RuntimeHandlers
	if len(handlers) == 0 {
		return ""
	}
	want := string(d.in.Policy.Spec.Operator.RuntimeClass)
	if slices.ContainsFunc(handlers, func(h corev1.NodeRuntimeHandler) bool { return h.Name == want }) {
		return ""
	}
	names := make([]string, 0, len(handlers))
	for _, h := range handlers {
		if h.Name != "" {
			names = append(names, h.Name)
		}
	}
	return fmt.Sprintf("the container toolkit configured %s, but the runtime reports no %q handler yet (it reports: %s)",
		d.variant.Runtime, want, strings.Join(names, ", "))
}
