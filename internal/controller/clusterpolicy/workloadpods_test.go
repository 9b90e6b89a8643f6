package clusterpolicy

import (
	"testing"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	gpuv1 "github.com/gpu-operator/gpu-operator/api/v1"
)

// A CUDA workload pod of a deleted policy names its successor alone as its
// controller, keeping any other owner; a pod the policy does not own is
// left as it is.
func TestWorkloadPodsAreAdopted(t *testing.T) {
	g := NewWithT(t)
	cp := &gpuv1.ClusterPolicy{ObjectMeta: metav1.ObjectMeta{Name: "a", UID: "uid-a"}}
	next := &gpuv1.ClusterPolicy{ObjectMeta: metav1.ObjectMeta{Name: "b", UID: "uid-b"}}
	other := metav1.OwnerReference{Kind: "ConfigMap", Name: "x", UID: "uid-x"}
	refs, owned := adopted([]metav1.OwnerReference{{Kind: "ClusterPolicy", Name: "a", UID: "uid-a"}, other}, cp, next)
	g.Expect(owned).To(BeTrue())
	g.Expect(refs).To(HaveLen(2))
	g.Expect(refs[0]).To(Equal(other))
	g.Expect(refs[1].UID).To(BeEquivalentTo("uid-b"))
	g.Expect(*refs[1].Controller).To(BeTrue())
	_, owned = adopted([]metav1.OwnerReference{other}, cp, next)
	g.Expect(owned).To(BeFalse())
}
