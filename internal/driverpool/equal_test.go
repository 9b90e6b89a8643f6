package driverpool

import (
	"reflect"
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"

	gpuv1 "github.com/gpu-operator/gpu-operator/api/v1"
	gpuv1alpha1 "github.com/gpu-operator/gpu-operator/api/v1alpha1"
)

// Sets built anew from the same objects are equal, pools with selectors
// included (a function compares equal to none); a selection that changed,
// a ClusterPolicy pool's or an NVIDIADriver's nodeAffinity alone, makes
// them differ, as any other field does.
func TestSetsFromTheSameObjectsAreEqual(t *testing.T) {
	g := NewWithT(t)
	policy := func(selector string) *gpuv1.ClusterPolicy {
		return &gpuv1.ClusterPolicy{Spec: gpuv1.ClusterPolicySpec{Driver: gpuv1.DriverSpec{Version: "595.91.07",
			NodePools: []gpuv1.DriverNodePool{{Name: "h100", NodeSelector: map[string]gpuv1.LabelValue{"gpu": gpuv1.LabelValue(selector)}}}}}}
	}
	g.Expect(FromPolicy(policy("h100")).Equal(FromPolicy(policy("h100")))).To(BeTrue())
	g.Expect(FromPolicy(policy("h100")).Equal(FromPolicy(policy("h200")))).To(BeFalse(), "a pool's nodeSelector")
	pinned := policy("h100")
	pinned.Spec.Driver.NodePools[0].Version = "580.126.20"
	g.Expect(FromPolicy(policy("h100")).Equal(FromPolicy(pinned))).To(BeFalse(), "a pool's version")

	drivers := func(zone string) []gpuv1alpha1.NVIDIADriver {
		return []gpuv1alpha1.NVIDIADriver{
			nvidiaDriver("silver", func(s *gpuv1alpha1.NVIDIADriverSpec) {
				s.NodeSelector = gpuv1.Labels{"driver.config": "silver"}
				s.NodeAffinity = &corev1.NodeAffinity{RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{
					NodeSelectorTerms: []corev1.NodeSelectorTerm{{MatchExpressions: []corev1.NodeSelectorRequirement{
						{Key: "zone", Operator: corev1.NodeSelectorOpIn, Values: []string{zone}}}}}}}
			}),
			nvidiaDriver("fallback", func(s *gpuv1alpha1.NVIDIADriverSpec) { s.Default = true }),
		}
	}
	a, b := Resolve(byNVIDIADrivers(), drivers("a")), Resolve(byNVIDIADrivers(), drivers("a"))
	g.Expect(a.Equal(b)).To(BeTrue())
	g.Expect(a.Equal(Resolve(byNVIDIADrivers(), drivers("b")))).To(BeFalse(), "an NVIDIADriver's nodeAffinity alone")
	b.Images = map[string]ImageVerdict{"nvcr.io/nvidia/driver:580": {}}
	g.Expect(a.Equal(b)).To(BeFalse(), "an image's verdict")
	b.Images = nil
	b.GPUCluster = "gpu-cluster"
	g.Expect(a.Equal(b)).To(BeFalse(), "a GPUCluster over the pools")
	b = Resolve(byNVIDIADrivers(), drivers("a"))
	b.Pools[0].Mode = gpuv1.AllocationDRA
	g.Expect(a.Equal(b)).To(BeFalse(), "a pool's allocation mode")
	// A Set's own fields are listed in Equal by hand (a Pool's are all
	// compared, its function apart): a new one must be added there.
	g.Expect(reflect.TypeFor[Set]().NumField()).To(Equal(5), "Set has a new field: compare it in Equal")
	g.Expect((*Set)(nil).Equal(nil)).To(BeTrue())
	g.Expect(a.Equal(nil)).To(BeFalse())
}
