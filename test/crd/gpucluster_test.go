package crd

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	. "github.com/onsi/gomega"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	gpuv1alpha1 "github.com/gpu-operator/gpu-operator/api/v1alpha1"
)

// NVIDIA's GPUCluster sample applies unchanged with strict field
// validation: its draDriver is taken as written, with the defaults NVIDIA's
// has, and the sections the ClusterPolicy governs here are kept and
// reported.
func TestNVIDIAsGPUClusterApplies(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	data, err := os.ReadFile(filepath.Join("testdata", "nvidia-gpucluster.yaml"))
	g.Expect(err).NotTo(HaveOccurred())
	obj := &unstructured.Unstructured{}
	g.Expect(yaml.Unmarshal(data, &obj.Object)).To(Succeed())
	g.Expect(obj.GetKind()).To(Equal("GPUCluster"))
	g.Expect(k8sClient.Create(ctx, obj)).To(Succeed())
	t.Cleanup(func() { _ = k8sClient.Delete(ctx, obj) })

	got := &gpuv1alpha1.GPUCluster{}
	g.Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(obj), got)).To(Succeed())
	d := got.Spec.DRADriver
	g.Expect(d.Repository).To(BeEquivalentTo("registry.k8s.io/dra-driver-nvidia"))
	g.Expect(d.Version).To(BeEquivalentTo("v0.4.0"))
	g.Expect(d.ComputeDomainsEnabled()).To(BeTrue())
	g.Expect(got.Spec.IgnoredFields()).To(ConsistOf("spec.dcgm", "spec.dcgmExporter", "spec.hostPaths", "spec.daemonsets"))
}

// A GPUCluster is a singleton, named gpu-cluster, as at NVIDIA, and needs
// its spec and draDriver; an empty draDriver is filled in with the driver
// we ship.
func TestGPUClusterSingleton(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	other := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "nvidia.com/v1alpha1", "kind": "GPUCluster",
		"metadata": map[string]any{"name": "second"}, "spec": map[string]any{"draDriver": map[string]any{}}}}
	err := k8sClient.Create(ctx, other)
	g.Expect(apierrors.IsInvalid(err)).To(BeTrue(), "%v", err)
	g.Expect(err.Error()).To(ContainSubstring("GPUCluster is a singleton, metadata.name must be 'gpu-cluster'"))

	noSpec := other.DeepCopy()
	noSpec.SetName(gpuv1alpha1.GPUClusterName)
	delete(noSpec.Object, "spec")
	err = k8sClient.Create(ctx, noSpec)
	g.Expect(err).To(HaveOccurred(), "no spec, no draDriver defaults: the DRA driver would have no image")
	g.Expect(err.Error()).To(ContainSubstring("spec"))

	noDriver := other.DeepCopy()
	noDriver.SetName(gpuv1alpha1.GPUClusterName)
	noDriver.Object["spec"] = map[string]any{}
	err = k8sClient.Create(ctx, noDriver)
	g.Expect(err).To(HaveOccurred())
	g.Expect(err.Error()).To(ContainSubstring("spec.draDriver"))

	empty := &gpuv1alpha1.GPUCluster{}
	empty.Name = gpuv1alpha1.GPUClusterName
	g.Expect(k8sClient.Create(ctx, empty)).To(Succeed())
	t.Cleanup(func() { _ = k8sClient.Delete(ctx, empty) })
	g.Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(empty), empty)).To(Succeed())
	g.Expect(empty.Spec.DRADriver.Version).To(BeEquivalentTo("v0.5.0@sha256:9b46984c0eb18def60e2b9817b874275f4b5b08d12d491de4f1a7b91b51d706c"))
	g.Expect(empty.Spec.DRADriver.Image).To(BeEquivalentTo("dra-driver-nvidia-gpu"))
}
