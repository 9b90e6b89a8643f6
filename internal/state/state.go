package state

import (
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	gpuv1 "github.com/gpu-operator/gpu-operator/api/v1"
)

// Name names a state. Per-node state names are also the operand names of the
// node labels nvidia.com/gpu.deploy.<name> and nvidia.com/gpu.state.<name>.
type Name string

// The states of the GPU node stack.
const (
	NodeFeatureDiscovery Name = "node-feature-discovery"
	Driver               Name = "driver"
	ContainerToolkit     Name = "container-toolkit"
	DevicePlugin         Name = "device-plugin"
	DCGMExporter         Name = "dcgm-exporter"
	GPUFeatureDiscovery  Name = "gpu-feature-discovery"
)

// Scope says where a state is judged.
type Scope int

const (
	// PerNode states run a pod on each GPU node, gated on the node by the
	// states before them, and carry a state label on each node.
	PerNode Scope = iota
	// ClusterWide states run for the whole cluster (NFD runs on every node,
	// GPU or not) and gate nothing per node: a node is a GPU node only once
	// NFD has labelled it.
	ClusterWide
)

// Operand renders the objects of one state. Implementations are pure: the
// same input gives the same objects, with no API calls.
type Operand interface {
	// Enabled reports whether the policy deploys the operand.
	Enabled(spec *gpuv1.ClusterPolicySpec) bool
	// Render returns every object of the operand, whole, ready for
	// server-side apply. It renders whether or not the operand is enabled,
	// so that the objects of a disabled operand can be found and pruned.
	Render(in RenderInput) ([]client.Object, error)
}

// RenderInput is what an operand renders from.
type RenderInput struct {
	// Policy is the active ClusterPolicy, with its defaults filled in.
	Policy *gpuv1.ClusterPolicy
	// Namespace is where the operator runs and deploys namespaced objects.
	Namespace string
	// Gate is the node affinity a per-node state's pods require: the node
	// is a GPU node, the operand may run there and every prerequisite is
	// ready or disabled there. Empty for cluster-wide states.
	Gate []corev1.NodeSelectorRequirement
}

// State is one node of the graph.
type State struct {
	Name    Name
	Scope   Scope
	After   []Name // direct prerequisites
	Operand Operand
}
