package render

import (
	admissionv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// NodeWrites says which node writes an operand's ServiceAccount may make.
// RBAC grants nodes update or patch on every node and every field; an
// operand changes a few labels, most on its own node, and a token taken
// from one GPU node must not taint, relabel or cordon the rest.
type NodeWrites struct {
	// Operand names the operand in the messages, such as mig-manager.
	Operand string
	// ServiceAccount is the operand's, in Namespace.
	Namespace, ServiceAccount string
	// OwnNodeOnly holds the operand to the node its token was issued on
	// (the API server puts it in the request: ServiceAccountTokenPodNodeInfo).
	OwnNodeOnly bool
	// Label is a CEL expression over a label key k that is true for each
	// key the operand may add, change or remove.
	Label string
	// RemoveOnly allows the changed labels only to go.
	RemoveOnly bool
	// Labels describes the allowed labels, for the message.
	Labels string
}

// NodeWritePolicy returns the ValidatingAdmissionPolicy and binding that
// hold an operand's node writes to w: no create or delete, no subresource
// (status), the allowed labels only, and the rest of the node (spec with
// its taints and cordon, annotations, owners, finalizers) as it was.
func NodeWritePolicy(meta metav1.ObjectMeta, w NodeWrites) []client.Object {
	validations := []admissionv1.Validation{{
		Expression: `request.operation == "UPDATE" && request.?subResource.orValue("") == ""`,
		MessageExpression: `"` + w.Operand + ` may only update nodes' labels, not " + string(request.operation) + " " + ` +
			`(request.?subResource.orValue("") == "" ? "" : request.subResource + " of ") + "node " + request.name`,
	}}
	if w.OwnNodeOnly {
		validations = append(validations,
			UserNodeKnown,
			admissionv1.Validation{
				Expression:        `request.name == variables.userNodeName`,
				MessageExpression: `"` + w.Operand + ` may update its own node '" + variables.userNodeName + "' only, not " + request.name`,
			})
	}
	label := w.Label
	if w.RemoveOnly {
		label = "(" + label + ") && !(k in variables.newLabels)"
	}
	validations = append(validations,
		admissionv1.Validation{
			Expression: `variables.changed.all(k, ` + label + `)`,
			MessageExpression: `"` + w.Operand + ` may ` + map[bool]string{true: "remove", false: "change"}[w.RemoveOnly] + ` ` + w.Labels +
				` only, not " + variables.changed.filter(k, !(` + label + `)).join(", ")`,
		},
		admissionv1.Validation{
			Expression: `request.operation != "UPDATE" || object.spec == oldObject.spec && ` +
				`object.metadata.?annotations.orValue({}) == oldObject.metadata.?annotations.orValue({}) && ` +
				`object.metadata.?ownerReferences.orValue([]) == oldObject.metadata.?ownerReferences.orValue([]) && ` +
				`object.metadata.?finalizers.orValue([]) == oldObject.metadata.?finalizers.orValue([])`,
			Message: w.Operand + " may change nodes' labels only: not their spec (taints, cordon), annotations, owners or finalizers",
		})
	return AdmissionPolicy(meta, admissionv1.ValidatingAdmissionPolicySpec{
		FailurePolicy:    ptr.To(admissionv1.Fail),
		MatchConstraints: Writes("", []string{"v1"}, "nodes", "nodes/*"),
		MatchConditions:  []admissionv1.MatchCondition{IsServiceAccount("isOperand", w.Namespace, w.ServiceAccount)},
		Variables: []admissionv1.Variable{
			UserNodeName,
			{Name: "oldLabels", Expression: `request.operation == "UPDATE" ? oldObject.metadata.?labels.orValue({}) : {}`},
			{Name: "newLabels", Expression: `request.operation == "UPDATE" ? object.metadata.?labels.orValue({}) : {}`},
			{Name: "changed", Expression: `variables.newLabels.filter(k, !(k in variables.oldLabels) || variables.oldLabels[k] != variables.newLabels[k]) + ` +
				`variables.oldLabels.filter(k, !(k in variables.newLabels))`},
		},
		Validations: validations,
	}, nil)
}
