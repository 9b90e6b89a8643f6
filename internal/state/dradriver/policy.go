package dradriver

import (
	admissionv1 "k8s.io/api/admissionregistration/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	gpuv1 "github.com/gpu-operator/gpu-operator/api/v1"
	"github.com/gpu-operator/gpu-operator/internal/render"
	"github.com/gpu-operator/gpu-operator/internal/state"
)

// sliceVersions are the DRA API's versions a slice may be written in.
var sliceVersions = []string{"v1", "v1beta1", "v1beta2"}

// slice is, in a slice policy's expressions, the object a request writes,
// or on DELETE the one it removes.
const slice = `(request.operation == "DELETE" ? oldObject : object)`

// sliceAdmissionPolicyName names the policy and its binding, NVIDIA's name
// (manifests/state-dra-driver/0700_resourceslices-policy.yaml L4, L41).
const sliceAdmissionPolicyName = "resourceslices-policy-nvidia-dra-driver"

// sliceAdmissionPolicy returns the ValidatingAdmissionPolicy and its
// binding that hold the kubelet plugin to its own node's ResourceSlices.
// The plugin's ClusterRole lets it write every ResourceSlice; a plugin on
// one node must not publish or remove another node's devices. The API
// server puts the node of a pod's token in the request
// (ServiceAccountTokenPodNodeInfo), and the policy denies a write by the
// plugin's ServiceAccount to a slice of any other node; a slice for all
// nodes or a node selector passes, as at NVIDIA. Without that node
// information every write by the plugin is denied, which the first
// validation's message says. This is 0700 (L1-44) with our namespace.
func sliceAdmissionPolicy(policy *gpuv1.ClusterPolicy, namespace string) []client.Object {
	meta := render.ObjectMeta(policy, sliceAdmissionPolicyName, "", string(state.DRADriver))
	return render.AdmissionPolicy(meta, admissionv1.ValidatingAdmissionPolicySpec{
		FailurePolicy:    ptr.To(admissionv1.Fail),
		MatchConstraints: render.Writes("resource.k8s.io", sliceVersions, "resourceslices"),
		MatchConditions:  []admissionv1.MatchCondition{render.IsServiceAccount("isRestrictedUser", namespace, KubeletPluginServiceAccount)},
		Variables: []admissionv1.Variable{
			render.UserNodeName,
			{Name: "objectNodeName", Expression: slice + `.spec.?nodeName.orValue("")`},
			{Name: "nodeSelectorValue", Expression: slice + `.spec.?nodeSelector.orValue(null)`},
			{Name: "allNodesValue", Expression: slice + `.spec.?allNodes.orValue(false)`},
		},
		Validations: []admissionv1.Validation{
			render.UserNodeKnown,
			{
				Expression: `variables.userNodeName == variables.objectNodeName || variables.allNodesValue == true || ` +
					`variables.nodeSelectorValue != null`,
				MessageExpression: `"this user running on node '"+variables.userNodeName+"' may not modify cluster or node resourceslices"`,
			},
		},
	}, nil)
}

// pluginSlicePolicyName names the policy and binding that hold the
// kubelet plugin to its own drivers' node-local slices, beside NVIDIA's.
const pluginSlicePolicyName = "kubelet-plugin-slices-nvidia-dra-driver"

// pluginSlicePolicy narrows what NVIDIA's policy above lets the kubelet
// plugin write: a slice of the node its token was issued on, which that
// policy asks, and of the driver's two drivers only, never one for every
// node or a node selector, which it lets through. Both plugins publish one
// pool keyed by their own node, through the kubelet plugin library, which
// sets spec.nodeName (dra-driver-nvidia-gpu 22407113,
// cmd/gpu-kubelet-plugin/driver.go:467-563,
// cmd/compute-domain-kubelet-plugin/driver.go:118-137); neither writes a
// cluster-wide slice, with which a token taken from one node could offer
// devices of any driver on every node.
func pluginSlicePolicy(policy *gpuv1.ClusterPolicy, namespace string) []client.Object {
	meta := render.ObjectMeta(policy, pluginSlicePolicyName, "", string(state.DRADriver))
	return render.AdmissionPolicy(meta, admissionv1.ValidatingAdmissionPolicySpec{
		FailurePolicy:    ptr.To(admissionv1.Fail),
		MatchConstraints: render.Writes("resource.k8s.io", sliceVersions, "resourceslices"),
		MatchConditions:  []admissionv1.MatchCondition{render.IsServiceAccount("isKubeletPlugin", namespace, KubeletPluginServiceAccount)},
		Validations: []admissionv1.Validation{
			{
				Expression: slice + `.spec.driver == "` + GPUDriverName + `" || ` + slice + `.spec.driver == "` + ComputeDomainDriverName + `"`,
				MessageExpression: `"the DRA kubelet plugin may write slices of drivers ` + GPUDriverName + ` and ` + ComputeDomainDriverName +
					` only, not " + ` + slice + `.spec.driver`,
			},
			{
				Expression: `!` + slice + `.spec.?allNodes.orValue(false) && !has(` + slice + `.spec.nodeSelector)`,
				Message:    "the DRA kubelet plugin may write its own node's slices only, not one for every node or a node selector",
			},
		},
	}, nil)
}
