package dradriver

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	gpuv1 "github.com/gpu-operator/gpu-operator/api/v1"
	"github.com/gpu-operator/gpu-operator/internal/render"
	"github.com/gpu-operator/gpu-operator/internal/state"
)

// The admission policies that hold the driver's node writes, and the
// labels they may change: a node's compute domain, and its NVLink clique
// (read at dra-driver-nvidia-gpu 95932046, the pinned commit).
const (
	pluginNodePolicyName     = "kubelet-plugin-nodes-nvidia-dra-driver"
	controllerNodePolicyName = "controller-nodes-nvidia-dra-driver"
	computeDomainNodeLabel   = "resource.nvidia.com/computeDomain"
	gpuCliqueNodeLabel       = "nvidia.com/gpu.clique"
)

// nodeWritePolicies hold each component's token to the node writes its
// code makes; its ClusterRole lets it update every node, every field:
//   - the kubelet plugin (the compute-domain plugin, on every GPU node)
//     sets and removes the compute-domain label on its own node, with a
//     full update (cmd/compute-domain-kubelet-plugin/computedomain.go:
//     393, 419), and, with GPU_CLIQUE_LABEL_ENABLED (which the operator
//     sets), keeps its node's nvidia.com/gpu.clique label with a merge
//     patch (computedomain.go:426-471); the GPU plugin writes no node;
//   - the compute-domain controller removes that label from any node that
//     carries it, and adds none (cmd/compute-domain-controller/node.go:124-137).
func nodeWritePolicies(policy *gpuv1.ClusterPolicy, namespace string, computeDomains bool) []client.Object {
	meta := func(name string) metav1.ObjectMeta {
		return render.ObjectMeta(policy, name, "", string(state.DRADriver))
	}
	label := `k == "` + computeDomainNodeLabel + `"`
	objs := render.NodeWritePolicy(meta(pluginNodePolicyName), render.NodeWrites{
		Operand: "the DRA kubelet plugin", Namespace: namespace, ServiceAccount: KubeletPluginServiceAccount,
		OwnNodeOnly: true, Label: label + ` || k == "` + gpuCliqueNodeLabel + `"`,
		Labels: computeDomainNodeLabel + " and " + gpuCliqueNodeLabel,
	})
	if computeDomains {
		objs = append(objs, render.NodeWritePolicy(meta(controllerNodePolicyName), render.NodeWrites{
			Operand: "the compute-domain controller", Namespace: namespace, ServiceAccount: ControllerName,
			Label: label, RemoveOnly: true, Labels: computeDomainNodeLabel,
		})...)
	}
	return objs
}
