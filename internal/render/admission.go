package render

import (
	admissionv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// AdmissionPolicy returns a ValidatingAdmissionPolicy and the binding of
// the same name that denies what it refuses, within match (nil: every
// object the policy's constraints match).
func AdmissionPolicy(meta metav1.ObjectMeta, spec admissionv1.ValidatingAdmissionPolicySpec, match *admissionv1.MatchResources) []client.Object {
	vap := &admissionv1.ValidatingAdmissionPolicy{
		TypeMeta:   TypeMeta("admissionregistration.k8s.io/v1", "ValidatingAdmissionPolicy"),
		ObjectMeta: meta,
		Spec:       spec,
	}
	binding := &admissionv1.ValidatingAdmissionPolicyBinding{
		TypeMeta:   TypeMeta("admissionregistration.k8s.io/v1", "ValidatingAdmissionPolicyBinding"),
		ObjectMeta: *meta.DeepCopy(),
		Spec: admissionv1.ValidatingAdmissionPolicyBindingSpec{
			PolicyName:        meta.Name,
			ValidationActions: []admissionv1.ValidationAction{admissionv1.Deny},
			MatchResources:    match,
		},
	}
	return []client.Object{vap, binding}
}

// Writes matches every create, update and delete of resources in group at
// versions: what an admission policy on an operand token's writes looks at.
func Writes(group string, versions []string, resources ...string) *admissionv1.MatchResources {
	return &admissionv1.MatchResources{
		ResourceRules: []admissionv1.NamedRuleWithOperations{{
			RuleWithOperations: admissionv1.RuleWithOperations{
				Operations: []admissionv1.OperationType{admissionv1.Create, admissionv1.Update, admissionv1.Delete},
				Rule:       admissionv1.Rule{APIGroups: []string{group}, APIVersions: versions, Resources: resources},
			},
		}},
	}
}

// ServiceAccountUser is the user a ServiceAccount's token authenticates
// as, quoted for a CEL expression.
func ServiceAccountUser(namespace, serviceAccount string) string {
	return `"system:serviceaccount:` + namespace + ":" + serviceAccount + `"`
}

// IsServiceAccount is a match condition: the request comes with the
// ServiceAccount's token.
func IsServiceAccount(name, namespace, serviceAccount string) admissionv1.MatchCondition {
	return admissionv1.MatchCondition{Name: name, Expression: `request.userInfo.username == ` + ServiceAccountUser(namespace, serviceAccount)}
}

// UserNodeName is the variable userNodeName: the node a pod-bound token
// was issued on, which the API server puts in the request
// (ServiceAccountTokenPodNodeInfo); "" without it.
var UserNodeName = admissionv1.Variable{Name: "userNodeName",
	Expression: `request.userInfo.extra[?'authentication.kubernetes.io/node-name'][0].orValue('')`}

// UserNodeKnown refuses a request whose token names no node, in NVIDIA's
// words (its ResourceSlice policy, manifests/state-dra-driver/0700): a
// policy that holds a token to its own node holds nothing without one.
var UserNodeKnown = admissionv1.Validation{
	Expression: `variables.userNodeName != ""`,
	Message: "no node association found for user, this user must run in a pod on a node and " +
		"ServiceAccountTokenPodNodeInfo must be enabled",
}
