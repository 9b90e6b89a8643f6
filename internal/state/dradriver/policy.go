package dradriver

import (
	admissionv1 "k8s.io/api/admissionregistration/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	gpuv1 "github.com/gpu-operator/gpu-operator/api/v1"
	"github.com/gpu-operator/gpu-operator/internal/render"
	"github.com/gpu-operator/gpu-operator/internal/state"
)

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
	// The object a request writes, or on DELETE the one it removes.
	const slice = `(request.operation == "DELETE" ? oldObject : object)`
	meta := render.ObjectMeta(policy, sliceAdmissionPolicyName, "", string(state.DRADriver))
	return render.AdmissionPolicy(meta, admissionv1.ValidatingAdmissionPolicySpec{
		FailurePolicy: ptr.To(admissionv1.Fail),
		MatchConstraints: &admissionv1.MatchResources{
			ResourceRules: []admissionv1.NamedRuleWithOperations{{
				RuleWithOperations: admissionv1.RuleWithOperations{
					Operations: []admissionv1.OperationType{admissionv1.Create, admissionv1.Update, admissionv1.Delete},
					Rule: admissionv1.Rule{
						APIGroups:   []string{"resource.k8s.io"},
						APIVersions: []string{"v1", "v1beta1", "v1beta2"},
						Resources:   []string{"resourceslices"},
					},
				},
			}},
		},
		MatchConditions: []admissionv1.MatchCondition{{
			Name: "isRestrictedUser",
			Expression: `request.userInfo.username == "system:serviceaccount:` + namespace + ":" +
				KubeletPluginServiceAccount + `"`,
		}},
		Variables: []admissionv1.Variable{
			{Name: "userNodeName", Expression: `request.userInfo.extra[?'authentication.kubernetes.io/node-name'][0].orValue('')`},
			{Name: "objectNodeName", Expression: slice + `.spec.?nodeName.orValue("")`},
			{Name: "nodeSelectorValue", Expression: slice + `.spec.?nodeSelector.orValue(null)`},
			{Name: "allNodesValue", Expression: slice + `.spec.?allNodes.orValue(false)`},
		},
		Validations: []admissionv1.Validation{
			{
				Expression: `variables.userNodeName != ""`,
				Message: "no node association found for user, this user must run in a pod on a node and " +
					"ServiceAccountTokenPodNodeInfo must be enabled",
			},
			{
				Expression: `variables.userNodeName == variables.objectNodeName || variables.allNodesValue == true || ` +
					`variables.nodeSelectorValue != null`,
				MessageExpression: `"this user running on node '"+variables.userNodeName+"' may not modify cluster or node resourceslices"`,
			},
		},
	}, nil)
}
