package packaging

import (
	"context"
	"testing"

	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	gpuv1alpha1 "github.com/gpu-operator/gpu-operator/api/v1alpha1"
)

// NVIDIA's way to a DRA cluster, its values with gpuCluster.deployCR=true
// and clusterPolicy.deployCR=false, renders NVIDIA's GPUCluster from the
// draDriver values, which the API server accepts, and keeps the
// ClusterPolicy it lies over: without one nothing would run the driver,
// the toolkit or the rest of the stack.
func TestNVIDIAGPUClusterValues(t *testing.T) {
	g := NewWithT(t)
	objs := template(t, "-f", nvidiaValues, "--set", "gpuCluster.deployCR=true", "--set", "clusterPolicy.deployCR=false",
		"--set", "draDriver.featureGates.NVMLDeviceHealthCheck=true", "--set", "draDriver.computeDomains.enabled=false")
	g.Expect(find(objs, "ClusterPolicy", "cluster-policy")).NotTo(BeNil(), "the GPUCluster lies over a ClusterPolicy")
	u := find(objs, "GPUCluster", gpuv1alpha1.GPUClusterName)
	g.Expect(u).NotTo(BeNil())
	g.Expect(k8sClient.Create(context.Background(), u.DeepCopy(), client.DryRunAll)).To(Succeed())
	gc := &gpuv1alpha1.GPUCluster{}
	g.Expect(runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, gc)).To(Succeed())
	d := gc.Spec.DRADriver
	g.Expect(d.Repository).To(BeEquivalentTo("nvcr.io/nvidia"))
	g.Expect(d.Version).To(BeEquivalentTo("v0.5.0"))
	g.Expect(d.FeatureGates).To(Equal(map[string]bool{"NVMLDeviceHealthCheck": true}))
	g.Expect(d.ComputeDomainsEnabled()).To(BeFalse())
	g.Expect(gc.Spec.IgnoredFields()).To(BeEmpty(), "the chart renders only what is acted on")

	for _, o := range template(t, "-f", nvidiaValues, "--set", "gpuCluster.deployCR=true", "--set", "clusterPolicy.create=false") {
		g.Expect(o.GetKind()).NotTo(Equal("ClusterPolicy"), "clusterPolicy.create=false leaves it to the user")
	}
	for _, o := range template(t, "-f", nvidiaValues) {
		g.Expect(o.GetKind()).NotTo(Equal("GPUCluster"), "NVIDIA's default is no GPUCluster")
	}
}
