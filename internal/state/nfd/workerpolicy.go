package nfd

import (
	admissionv1 "k8s.io/api/admissionregistration/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/gpu-operator/gpu-operator/internal/render"
	"github.com/gpu-operator/gpu-operator/internal/state"
)

// nodeNameLabel is the label nfd-master reads a NodeFeature's node from.
const nodeNameLabel = "nfd.node.kubernetes.io/node-name"

// WorkerFeaturePolicyName names the admission policy and binding that hold
// nfd-worker to its own node's NodeFeature, after the namespace: they are
// cluster-wide names.
func WorkerFeaturePolicyName(namespace string) string {
	return "nvidia-nfd-worker-features-" + namespace
}

// workerFeaturePolicy holds nfd-worker's token, on every node, to its own
// node's NodeFeature. Its Role lets it write every NodeFeature of the
// namespace, and nfd-master labels, annotates and taints the node a
// NodeFeature's nfd.node.kubernetes.io/node-name label names, whatever
// the object's name (node-feature-discovery v0.19.0,
// pkg/nfd-master/nfd-api-controller.go:361-382, nfd-master.go:631-645): a
// token taken from one node could otherwise take GPU labels off every
// other node, or put them on nodes without GPUs. The worker writes one
// NodeFeature, named after its node (NODE_NAME) and labelled with it
// (pkg/nfd-worker/nfd-worker.go:919-979); the policy asks both of every
// write, against the node the token was issued on.
func workerFeaturePolicy(in state.RenderInput) []client.Object {
	meta := render.ObjectMeta(in.Policy, WorkerFeaturePolicyName(in.Namespace), "", string(state.NodeFeatureDiscovery))
	meta.Labels[render.LabelName] = "nvidia-nfd-worker-features" // a label value holds 63 characters, a namespace as many
	return render.AdmissionPolicy(meta, admissionv1.ValidatingAdmissionPolicySpec{
		FailurePolicy:    ptr.To(admissionv1.Fail),
		MatchConstraints: render.Writes(nfdGroup, []string{"*"}, "nodefeatures"),
		MatchConditions:  []admissionv1.MatchCondition{render.IsServiceAccount("isNFDWorker", in.Namespace, WorkerName)},
		Variables:        []admissionv1.Variable{render.UserNodeName},
		Validations: []admissionv1.Validation{
			render.UserNodeKnown,
			{
				Expression:        `request.name == variables.userNodeName`,
				MessageExpression: `"nfd-worker may write its own node's NodeFeature '" + variables.userNodeName + "' only, not " + request.name`,
			},
			{
				Expression: `request.operation == "DELETE" || ` +
					`object.metadata.?labels[?'` + nodeNameLabel + `'].orValue('') == variables.userNodeName`,
				MessageExpression: `"nfd-worker's NodeFeature must be labelled ` + nodeNameLabel + `=" + variables.userNodeName + ", its own node"`,
			},
		},
	}, nil)
}
