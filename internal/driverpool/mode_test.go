package driverpool

import (
	"context"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	gpuv1 "github.com/gpu-operator/gpu-operator/api/v1"
	gpuv1alpha1 "github.com/gpu-operator/gpu-operator/api/v1alpha1"
)

// A pool's allocation mode is its own, else the policy's, else the device
// plugin's, and it never reaches the driver settings its DaemonSets are
// rendered from.
func TestPoolModes(t *testing.T) {
	g := NewWithT(t)
	cp := &gpuv1.ClusterPolicy{Spec: gpuv1.ClusterPolicySpec{Driver: gpuv1.DriverSpec{Version: "595.91.07",
		AllocationMode: gpuv1.AllocationDRA,
		NodePools: []gpuv1.DriverNodePool{
			{Name: "nvl72", NodeSelector: map[string]gpuv1.LabelValue{"rack": "nvl72"}},
			{Name: "h100", NodeSelector: map[string]gpuv1.LabelValue{"gpu": "h100"}, AllocationMode: gpuv1.AllocationDevicePlugin},
		}}}}
	s := FromPolicy(cp)
	g.Expect(s.Pool("nvl72").Mode).To(Equal(gpuv1.AllocationDRA), "a pool without a mode takes driver.allocationMode")
	g.Expect(s.Pool("h100").Mode).To(Equal(gpuv1.AllocationDevicePlugin))
	g.Expect(s.Pool(gpuv1.DefaultDriverPool).Mode).To(Equal(gpuv1.AllocationDRA))
	g.Expect(s.Assign("n", map[string]string{"gpu": "h100"}).Mode).To(Equal(gpuv1.AllocationDevicePlugin))
	g.Expect(s.Assign("n", map[string]string{"rack": "nvl72"}).Mode).To(Equal(gpuv1.AllocationDRA))
	g.Expect(s.UsesDRA()).To(BeTrue())
	for _, p := range s.Pools {
		g.Expect(p.Driver.AllocationMode).To(BeEmpty(), "pool %s: a mode change must not change the driver's settings", p.Name)
	}

	cp.Spec.Driver.AllocationMode = ""
	cp.Spec.Driver.NodePools[0].AllocationMode = ""
	s = FromPolicy(cp)
	g.Expect(s.Pool(gpuv1.DefaultDriverPool).Mode).To(Equal(gpuv1.AllocationDevicePlugin), "an unset mode is the device plugin")
	g.Expect(s.UsesDRA()).To(BeFalse())
	g.Expect((*Set)(nil).UsesDRA()).To(BeFalse())
}

func TestNVIDIADriverModes(t *testing.T) {
	g := NewWithT(t)
	cp := byNVIDIADrivers()
	cp.Spec.Driver.AllocationMode = gpuv1.AllocationDRA
	s := Resolve(cp, []gpuv1alpha1.NVIDIADriver{
		nvidiaDriver("own", func(s *gpuv1alpha1.NVIDIADriverSpec) { s.AllocationMode = gpuv1.AllocationDevicePlugin }),
		nvidiaDriver("inherits", nil),
	})
	g.Expect(s.Pool("own").Mode).To(Equal(gpuv1.AllocationDevicePlugin))
	g.Expect(s.Pool("inherits").Mode).To(Equal(gpuv1.AllocationDRA), "an NVIDIADriver without a mode takes the policy's")

	cp.Spec.Driver.AllocationMode = ""
	s = Resolve(cp, []gpuv1alpha1.NVIDIADriver{nvidiaDriver("inherits", func(s *gpuv1alpha1.NVIDIADriverSpec) {
		s.NodeSelector = gpuv1.Labels{"pool": "inherits"}
	})})
	g.Expect(s.Pool("inherits").Mode).To(Equal(gpuv1.AllocationDevicePlugin))

	held := s.Assign("n", map[string]string{gpuv1.LabelDriverPool: "gone"})
	g.Expect(held.Unclaimed).To(BeTrue())
	g.Expect(held.Mode).To(BeEmpty(), "a node no pool holds keeps the mode it has")
}

// A GPUCluster puts every pool in allocation mode dra, whatever its own,
// and its draDriver is the one the DRA driver runs with; one being deleted
// leaves the pools their own modes, and the policy's draDriver applies.
func TestGPUClusterOverlay(t *testing.T) {
	g := NewWithT(t)
	cp := &gpuv1.ClusterPolicy{Spec: gpuv1.ClusterPolicySpec{Driver: gpuv1.DriverSpec{Version: "595.91.07",
		NodePools: []gpuv1.DriverNodePool{
			{Name: "h100", NodeSelector: map[string]gpuv1.LabelValue{"gpu": "h100"}, AllocationMode: gpuv1.AllocationDevicePlugin},
		}}}}
	gc := &gpuv1alpha1.GPUCluster{}
	gc.Name = gpuv1alpha1.GPUClusterName
	gc.Spec.DRADriver.Version = "v0.5.0"

	s := FromPolicy(cp)
	s.Overlay(gc)
	g.Expect(s.GPUCluster).To(Equal(gpuv1alpha1.GPUClusterName))
	for _, p := range s.Pools {
		g.Expect(p.Mode).To(Equal(gpuv1.AllocationDRA), "pool %s", p.Name)
	}
	g.Expect(s.Assign("n", map[string]string{"gpu": "h100"}).Mode).To(Equal(gpuv1.AllocationDRA), "a pool's own mode gives way")
	g.Expect(s.DRADriver()).To(BeIdenticalTo(&gc.Spec.DRADriver))

	byDrivers := byNVIDIADrivers()
	s = Resolve(byDrivers, []gpuv1alpha1.NVIDIADriver{
		nvidiaDriver("own", func(s *gpuv1alpha1.NVIDIADriverSpec) { s.AllocationMode = gpuv1.AllocationDevicePlugin }),
	})
	s.Overlay(gc)
	g.Expect(s.Pool("own").Mode).To(Equal(gpuv1.AllocationDRA), "an NVIDIADriver's mode gives way too")

	deleting := gc.DeepCopy()
	deleting.DeletionTimestamp = &metav1.Time{Time: time.Now()}
	s = FromPolicy(cp)
	s.Overlay(deleting)
	g.Expect(s.Pool("h100").Mode).To(Equal(gpuv1.AllocationDevicePlugin), "pools go back while it is deleted")
	g.Expect(s.GPUCluster).To(BeEmpty())
	g.Expect(s.DRADriver()).To(BeNil())
	g.Expect((*Set)(nil).DRADriver()).To(BeNil())
}

// Load lays the GPUCluster over the pools it reads, and only the one named
// gpu-cluster (the API server admits no other name).
func TestLoadReadsTheGPUCluster(t *testing.T) {
	g := NewWithT(t)
	scheme := runtime.NewScheme()
	g.Expect(gpuv1alpha1.AddToScheme(scheme)).To(Succeed())
	cp := &gpuv1.ClusterPolicy{Spec: gpuv1.ClusterPolicySpec{Driver: gpuv1.DriverSpec{Version: "595.91.07"}}}
	c := fake.NewClientBuilder().WithScheme(scheme).Build()
	s, err := Load(context.Background(), c, cp, nil)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(s.UsesDRA()).To(BeFalse())

	other := &gpuv1alpha1.GPUCluster{}
	other.Name = "not-the-singleton" // the API server refuses it; a fake client does not
	g.Expect(c.Create(context.Background(), other)).To(Succeed())
	s, err = Load(context.Background(), c, cp, nil)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(s.UsesDRA()).To(BeFalse(), "only gpu-cluster is read")

	gc := &gpuv1alpha1.GPUCluster{}
	gc.Name = gpuv1alpha1.GPUClusterName
	g.Expect(c.Create(context.Background(), gc)).To(Succeed())
	s, err = Load(context.Background(), c, cp, nil)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(s.UsesDRA()).To(BeTrue())
	g.Expect(s.GPUCluster).To(Equal(gpuv1alpha1.GPUClusterName))
}
