package dradriver

import (
	admissionv1 "k8s.io/api/admissionregistration/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	gpuv1 "github.com/gpu-operator/gpu-operator/api/v1"
	"github.com/gpu-operator/gpu-operator/internal/render"
	"github.com/gpu-operator/gpu-operator/internal/state"
)

// daemonPodPolicyName names the policy and its binding that hold the IMEX
// daemons to labelling their own pods.
const daemonPodPolicyName = "compute-domain-daemon-pods-nvidia-dra-driver"

// daemonPodPolicy returns the ValidatingAdmissionPolicy and its binding
// that hold each IMEX daemon's writes of pods to what the daemon does: it
// merges its clique's label into its own pod's labels
// (cmd/compute-domain-daemon/main.go:537-560 at dra-driver-nvidia-gpu
// 22407113, addComputeDomainCliqueLabel). RBAC cannot say "its own pod",
// and the daemons' token is on every IMEX node: a token taken there could
// otherwise patch any pod of the operator's namespace, the operator's own
// included (a pod's image may be changed), and run it as the operator.
// The API server puts the pod of a pod's token in the request
// (ServiceAccountTokenPodNodeInfo); without it every pod write of the
// daemons is denied, which the first validation's message says. Only
// labels may change: the spec, annotations, owners and finalizers stay.
func daemonPodPolicy(policy *gpuv1.ClusterPolicy, namespace string) []client.Object {
	meta := render.ObjectMeta(policy, daemonPodPolicyName, "", string(state.DRADriver))
	return render.AdmissionPolicy(meta, admissionv1.ValidatingAdmissionPolicySpec{
		FailurePolicy:    ptr.To(admissionv1.Fail),
		MatchConstraints: render.Writes("", []string{"v1"}, "pods", "pods/*"),
		MatchConditions:  []admissionv1.MatchCondition{render.IsServiceAccount("isIMEXDaemon", namespace, ComputeDomainDaemonServiceAccount)},
		Variables: []admissionv1.Variable{
			{Name: "userPodName", Expression: `request.userInfo.extra[?'authentication.kubernetes.io/pod-name'][0].orValue('')`},
		},
		Validations: []admissionv1.Validation{
			{
				Expression: `variables.userPodName != ""`,
				Message: "no pod association found for user, this user must run in a pod and " +
					"ServiceAccountTokenPodNodeInfo must be enabled",
			},
			{
				Expression: `request.operation == "UPDATE" && request.?subResource.orValue("") == "" && request.namespace == "` + namespace + `" && ` +
					`object.metadata.name == variables.userPodName`,
				Message: "an IMEX daemon may update its own pod only",
				MessageExpression: `"an IMEX daemon may update its own pod '" + variables.userPodName + "' only, not " + ` +
					`string(request.operation) + " " + request.namespace + "/" + request.name`,
			},
			{
				Expression: `object.spec == oldObject.spec && ` +
					`object.metadata.?annotations.orValue({}) == oldObject.metadata.?annotations.orValue({}) && ` +
					`object.metadata.?ownerReferences.orValue([]) == oldObject.metadata.?ownerReferences.orValue([]) && ` +
					`object.metadata.?finalizers.orValue([]) == oldObject.metadata.?finalizers.orValue([])`,
				Message: "an IMEX daemon may change its pod's labels only",
			},
		},
	}, nil)
}
