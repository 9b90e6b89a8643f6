package render

import (
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// The metadata hash follows the labels and the user's annotations, not
// the operator's own annotations (which say what a pod runs); what a
// running pod is given is the template's labels, the user's annotations
// and the hash, never the operator's annotations.
func TestRunningPodMetadata(t *testing.T) {
	g := NewWithT(t)
	labels := map[string]string{"app": "nvidia-driver-daemonset", "team": "ml"}
	annotations := map[string]string{"example.com/owner": "infra", AnnotationTemplateHash: "a", "nvidia.com/gpu-operator.driver-version": "580"}
	base := metadataHash(labels, annotations)

	g.Expect(metadataHash(map[string]string{"app": "nvidia-driver-daemonset", "team": "hpc"}, annotations)).NotTo(Equal(base), "a label")
	g.Expect(metadataHash(labels, map[string]string{"example.com/owner": "ops", AnnotationTemplateHash: "a"})).NotTo(Equal(base), "a user's annotation")
	g.Expect(metadataHash(labels, map[string]string{"example.com/owner": "infra", AnnotationTemplateHash: "b"})).To(Equal(base),
		"the operator's annotations are not the pod's metadata to keep up")
	g.Expect(metadataHash(map[string]string{"team=ml\nl:app": "x"}, nil)).NotTo(Equal(metadataHash(map[string]string{"team": "ml\nl:app=x"}, nil)),
		"keys and values do not run into each other")

	tpl := &corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels, Annotations: annotations}}
	tpl.Annotations[AnnotationMetadataHash] = base
	gotLabels, gotAnnotations := RunningPodMetadata(tpl)
	g.Expect(gotLabels).To(Equal(labels))
	g.Expect(gotAnnotations).To(Equal(map[string]string{"example.com/owner": "infra", AnnotationMetadataHash: base}))
}
