package render

import (
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
)

// The readiness and unhealthy taints' tolerations are not in the hash:
// adding them to the operands (or any later toggle) must not make a
// running driver outdated, which would send the fleet through a driver
// upgrade.
func TestHashLeavesOutTheOperatorsTaintTolerations(t *testing.T) {
	g := NewWithT(t)
	spec := corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "i"}}, Tolerations: []corev1.Toleration{gpuTaintToleration}}
	before, err := specHash(&spec, nil)
	g.Expect(err).NotTo(HaveOccurred())
	withReadiness := spec
	withReadiness.Tolerations = append([]corev1.Toleration{gpuTaintToleration}, ownTaintTolerations...)
	after, err := specHash(&withReadiness, nil)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(after).To(Equal(before))
	g.Expect(withReadiness.Tolerations).To(HaveLen(5), "the spec itself keeps them")

	other := spec
	other.Tolerations = append([]corev1.Toleration{gpuTaintToleration}, corev1.Toleration{Key: "team", Operator: corev1.TolerationOpExists})
	changed, err := specHash(&other, nil)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(changed).NotTo(Equal(before), "other tolerations count")
}

// What pods read besides their spec counts in the hash when there is any,
// and leaves the hash as it always was when there is none.
func TestHashCountsInputs(t *testing.T) {
	g := NewWithT(t)
	spec := corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "i"}}}
	bare, err := specHash(&spec, nil)
	g.Expect(err).NotTo(HaveOccurred())
	empty, err := specHash(&spec, map[string]string{})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(empty).To(Equal(bare))
	one, err := specHash(&spec, map[string]string{"digest": "a"})
	g.Expect(err).NotTo(HaveOccurred())
	other, err := specHash(&spec, map[string]string{"digest": "b"})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(one).NotTo(Equal(bare))
	g.Expect(other).NotTo(Equal(one))
}
