package clusterpolicy

import (
	admissionv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/gpu-operator/gpu-operator/internal/state/toolkit"
)

// isNRIGuard reports whether an object is the NRI plugin's admission
// policy or its binding.
func (r *Reconciler) isNRIGuard(o client.Object) bool {
	switch o.(type) {
	case *admissionv1.ValidatingAdmissionPolicy, *admissionv1.ValidatingAdmissionPolicyBinding:
		return o.GetName() == toolkit.NRIGuardName(r.Namespace)
	}
	return false
}

// runsNRIPlugin reports whether an object's pods run the toolkit's NRI
// plugin: they wait, as they are, while its guard could not be applied,
// for the plugin must never inject devices a tenant's pod names.
func runsNRIPlugin(o client.Object) bool {
	ds, ok := o.(*appsv1.DaemonSet)
	return ok && ds.Spec.Template.Annotations[toolkit.AnnotationNRIPlugin] == "true"
}
