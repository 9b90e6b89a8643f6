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
