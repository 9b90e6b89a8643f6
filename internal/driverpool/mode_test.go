package driverpool

import (
	"testing"

	. "github.com/onsi/gomega"

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
