package crd

import (
	"context"
	"testing"

	. "github.com/onsi/gomega"
	"sigs.k8s.io/controller-runtime/pkg/client"

	gpuv1 "github.com/gpu-operator/gpu-operator/api/v1"
)

// GPUDirect Storage and GDRCopy build against the driver's sources, which
// precompiled images do not carry: the pair is refused, naming both.
func TestGPUDirectNeedsCompiledDrivers(t *testing.T) {
	g := NewWithT(t)
	obj := validPolicy("gds-precompiled")
	spec := obj.Object["spec"].(map[string]any)
	spec["driver"] = map[string]any{"usePrecompiled": true, "version": "580"}
	spec["gds"] = map[string]any{"enabled": true}
	err := k8sClient.Create(context.Background(), obj)
	g.Expect(err).To(HaveOccurred())
	g.Expect(err.Error()).To(And(ContainSubstring("spec.driver.usePrecompiled"), ContainSubstring("turn gds and gdrcopy off")))
	spec["gds"] = map[string]any{"enabled": false}
	g.Expect(k8sClient.Create(context.Background(), obj)).To(Succeed())
	t.Cleanup(func() { _ = k8sClient.Delete(context.Background(), obj) })
	got := &gpuv1.ClusterPolicy{}
	g.Expect(k8sClient.Get(context.Background(), client.ObjectKeyFromObject(obj), got)).To(Succeed())
	g.Expect(got.Spec.GDS.Image).To(BeEquivalentTo("nvidia-fs"), "NVIDIA's image by default")
	g.Expect(got.Spec.GDS.Version).To(BeEquivalentTo("2.29.4"))
}
