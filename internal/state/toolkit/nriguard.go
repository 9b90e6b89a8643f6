package toolkit

import (
	admissionv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/predicate"

	gpuv1 "github.com/gpu-operator/gpu-operator/api/v1"
	"github.com/gpu-operator/gpu-operator/internal/operandpods"
	"github.com/gpu-operator/gpu-operator/internal/render"
	"github.com/gpu-operator/gpu-operator/internal/state"
)

// AnnotationNRIPlugin marks the pods made to run the NRI plugin, on their
// template: their guard stays while one is left (NRIPluginPodsLeft), for a
// rollout away from NRI replaces them one node at a time.
const AnnotationNRIPlugin = gpuv1.OperatorAnnotationPrefix + "nri-plugin"

// markNRIPlugin marks the toolkit's pods when they run the NRI plugin. The
// mark is an input of the spec's hash: it changes only with the plugin,
// whose switch changes the pod's env anyway.
func markNRIPlugin(policy *gpuv1.ClusterPolicy) func(*render.Workload) {
	return func(w *render.Workload) {
		if !policy.Spec.CDI.UsesNRI() {
			return
		}
		if w.Inputs == nil {
			w.Inputs = map[string]string{}
		}
		w.Inputs[AnnotationNRIPlugin] = "true"
	}
}

// NRIPluginPodsLeft reports whether a pod of the given summaries was made
// to run the NRI plugin.
func NRIPluginPodsLeft(pods []*operandpods.Pod) bool {
	for _, p := range pods {
		if p.State == state.ContainerToolkit && p.Annotation(AnnotationNRIPlugin) == "true" {
			return true
		}
	}
	return false
}

// NRIPluginPodGone passes the deletion of a pod made to run the NRI
// plugin: the last one gone, the next pass of the policy prunes the guard.
// Nothing else is sure to bring that pass: the replacement pod may be
// ready before any node label or DaemonSet status the operator watches
// tells of the change.
func NRIPluginPodGone() predicate.Predicate {
	return predicate.Funcs{
		CreateFunc: func(event.CreateEvent) bool { return false },
		UpdateFunc: func(event.UpdateEvent) bool { return false },
		DeleteFunc: func(e event.DeleteEvent) bool {
			p, ok := e.Object.(*operandpods.Pod)
			return ok && NRIPluginPodsLeft([]*operandpods.Pod{p})
		},
		GenericFunc: func(event.GenericEvent) bool { return false },
	}
}

// NRIGuardName names the ValidatingAdmissionPolicy and its binding that
// keep CDI device annotations out of pods outside the operator's
// namespace; cluster-scoped, so the namespace is in the name.
func NRIGuardName(namespace string) string { return "nvidia-nri-devices-" + namespace }

// nriGuard returns the admission policy and binding that refuse
// nvidia.cdi.k8s.io/ annotations on pods outside the operator's namespace,
// whenever the policy runs the toolkit's NRI plugin: the plugin injects
// whatever devices those annotations name, restricting only management
// devices to the operator's namespace, so any tenant pod could name every
// GPU of its node. The operator renders it, not the chart: NRI turned on
// by kubectl edit, kustomize or OLM gets it too. The device plugin hands
// its devices to containers through the kubelet's Allocate response, not
// through the pod object, so a pod asking for nvidia.com/gpu passes.
func nriGuard(policy *gpuv1.ClusterPolicy, namespace string) []client.Object {
	name := NRIGuardName(namespace)
	meta := render.ObjectMeta(policy, name, "", string(state.ContainerToolkit))
	meta.Labels[render.LabelName] = "nvidia-nri-devices" // a label value holds 63 characters, a namespace as many
	// Every namespace but the operator's.
	match := &admissionv1.MatchResources{
		NamespaceSelector: &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{
			Key: corev1.LabelMetadataName, Operator: metav1.LabelSelectorOpNotIn, Values: []string{namespace},
		}}},
	}
	return render.AdmissionPolicy(meta, admissionv1.ValidatingAdmissionPolicySpec{
		FailurePolicy: ptr.To(admissionv1.Fail),
		MatchConstraints: &admissionv1.MatchResources{
			ResourceRules: []admissionv1.NamedRuleWithOperations{{
				RuleWithOperations: admissionv1.RuleWithOperations{
					Operations: []admissionv1.OperationType{admissionv1.Create, admissionv1.Update},
					// pods/status: a status update may write metadata too.
					Rule: admissionv1.Rule{APIGroups: []string{""}, APIVersions: []string{"v1"}, Resources: []string{"pods", "pods/status"}},
				},
			}},
		},
		Variables: []admissionv1.Variable{{
			// The device annotations the request writes.
			Name: "devices",
			Expression: "has(object.metadata.annotations) ? object.metadata.annotations.filter(k, k.startsWith('" +
				state.NRIDevicesAnnotationPrefix + "')) : []",
		}},
		Validations: []admissionv1.Validation{{
			// An update may keep (or drop) what a pod already carries,
			// so that a pod annotated while no guard stood can still be
			// finalized, labelled or deleted; it may add or change none.
			Expression: "request.operation == 'CREATE' ? size(variables.devices) == 0 : " +
				"variables.devices.all(k, has(oldObject.metadata.annotations) && k in oldObject.metadata.annotations && " +
				"oldObject.metadata.annotations[k] == object.metadata.annotations[k])",
			Message: state.NRIDevicesAnnotationPrefix + " annotations name GPUs for the NVIDIA toolkit's NRI plugin to inject: only the GPU operator's " +
				"namespace " + namespace + " may set them; request nvidia.com/gpu instead",
		}},
	}, match)
}
