package render

import (
	"maps"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	gpuv1 "github.com/gpu-operator/gpu-operator/api/v1"
	"github.com/gpu-operator/gpu-operator/internal/version"
)

// Labels and annotations on the objects the operator creates.
const (
	LabelName      = "app.kubernetes.io/name"
	LabelComponent = "app.kubernetes.io/component"
	LabelPartOf    = "app.kubernetes.io/part-of"
	LabelManagedBy = "app.kubernetes.io/managed-by"
	LabelVersion   = "app.kubernetes.io/version"
	// LabelApp is NVIDIA's operand label (Workload.App).
	LabelApp = "app"

	// ManagedBy is the managed-by value of every operator object; the
	// operator's cache selects its objects and pods by it.
	ManagedBy = "gpu-operator"
	partOf    = "gpu-operator"

	// LabelState names the state an object or pod belongs to.
	LabelState = gpuv1.OperatorAnnotationPrefix + "state"
	// AnnotationTemplateHash is the hash of a DaemonSet's pod template, on
	// the DaemonSet's template and so on every pod made from it: a pod
	// whose hash differs from its DaemonSet's runs an older spec.
	AnnotationTemplateHash = gpuv1.OperatorAnnotationPrefix + "template-hash"
)

// ObjectMeta returns the metadata of an operator object: name, namespace
// (empty for cluster-scoped objects), the standard labels and a controller
// reference to the policy, so that deleting the policy deletes it.
func ObjectMeta(policy *gpuv1.ClusterPolicy, name, namespace, state string) metav1.ObjectMeta {
	return metav1.ObjectMeta{
		Name:      name,
		Namespace: namespace,
		Labels:    StandardLabels(name, state),
		OwnerReferences: []metav1.OwnerReference{{
			APIVersion:         gpuv1.GroupVersion.String(),
			Kind:               "ClusterPolicy",
			Name:               policy.Name,
			UID:                policy.UID,
			Controller:         ptr.To(true),
			BlockOwnerDeletion: ptr.To(true),
		}},
	}
}

// StandardLabels are the app.kubernetes.io labels plus the state label.
func StandardLabels(name, state string) map[string]string {
	return map[string]string{
		LabelName:      name,
		LabelComponent: state,
		LabelPartOf:    partOf,
		LabelManagedBy: ManagedBy,
		LabelVersion:   version.Version,
		LabelState:     state,
	}
}

// SelectorLabels are the labels a workload selects its pods by; they never
// change for the life of the workload.
func SelectorLabels(name string) map[string]string {
	return map[string]string{LabelName: name, LabelManagedBy: ManagedBy}
}

// merge returns user labels overlaid with ours: a user cannot override the
// labels the operator selects and judges by.
func merge(user map[string]string, ours map[string]string) map[string]string {
	out := make(map[string]string, len(user)+len(ours))
	maps.Copy(out, user)
	maps.Copy(out, ours)
	return out
}

// TypeMeta sets apiVersion and kind, which server-side apply needs.
func TypeMeta(apiVersion, kind string) metav1.TypeMeta {
	return metav1.TypeMeta{APIVersion: apiVersion, Kind: kind}
}
