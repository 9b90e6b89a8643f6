package clusterpolicy

import (
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	gpuv1 "github.com/gpu-operator/gpu-operator/api/v1"
	"github.com/gpu-operator/gpu-operator/internal/state/nfd"
)

// The cleanup's GFD labels are those NFD says it set and GFD writes: not
// NFD's own, not a person's label of a GFD name, not one NFD listed but
// someone removed already.
func TestGFDLabelsAreWhatNFDPublishedForGFD(t *testing.T) {
	g := NewWithT(t)
	n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{
		Labels: map[string]string{"nvidia.com/gpu.product": "NVIDIA-H200", "nvidia.com/gpu.family": "persons",
			"feature.node.kubernetes.io/pci-10de.present": "true", gpuv1.LabelGPUPresent: "true"},
		Annotations: map[string]string{nfd.FeatureLabelsAnnotation: "nvidia.com/gpu.count,nvidia.com/gpu.product,pci-10de.present"},
	}}
	g.Expect(gfdLabels(n)).To(ConsistOf("nvidia.com/gpu.product"))
	delete(n.Annotations, nfd.FeatureLabelsAnnotation)
	g.Expect(gfdLabels(n)).To(BeEmpty(), "without NFD's word, no label is GFD's through NFD")
}

// The wait for NFD runs GFDLabelsWait from the deletion, on the
// reconciler's clock.
func TestGFDWaitRunsFromTheDeletion(t *testing.T) {
	g := NewWithT(t)
	deleted := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	now := deleted
	r := &Reconciler{GFDLabelsWait: 2 * time.Minute, Now: func() time.Time { return now }}
	cp := &gpuv1.ClusterPolicy{ObjectMeta: metav1.ObjectMeta{DeletionTimestamp: &metav1.Time{Time: deleted}}}
	g.Expect(r.gfdWaitOver(cp)).To(BeFalse())
	now = deleted.Add(2*time.Minute - time.Second)
	g.Expect(r.gfdWaitOver(cp)).To(BeFalse())
	now = deleted.Add(2 * time.Minute)
	g.Expect(r.gfdWaitOver(cp)).To(BeTrue())
}
