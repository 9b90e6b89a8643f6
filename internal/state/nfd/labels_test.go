package nfd

import (
	"testing"

	. "github.com/onsi/gomega"
)

// The annotation reads as nfd-master writes it: the default namespace's
// names without their prefix, others whole.
func TestPublishedLabelsReadNFDsAnnotation(t *testing.T) {
	g := NewWithT(t)
	labels := []string{"nvidia.com/gpu.product", "feature.node.kubernetes.io/pci-10de.present", "nvidia.com/gpu.count"}
	value := Annotate(labels)
	g.Expect(value).To(Equal("nvidia.com/gpu.count,nvidia.com/gpu.product,pci-10de.present"))
	g.Expect(PublishedLabels(map[string]string{FeatureLabelsAnnotation: value})).To(ConsistOf(labels))
	g.Expect(PublishedLabels(map[string]string{})).To(BeEmpty())
	g.Expect(Annotate(nil)).To(BeEmpty())
}
