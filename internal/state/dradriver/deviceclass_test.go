package dradriver

import (
	"fmt"
	"slices"
	"testing"

	. "github.com/onsi/gomega"
	resourcev1 "k8s.io/api/resource/v1"
)

// upstreamDeviceClasses is NVIDIA's 0400-0430.
const upstreamDeviceClasses = "testdata/dra-deviceclasses-v26.7.0.yaml"

// The DeviceClasses are NVIDIA's, name for name and CEL selector byte for
// byte, the compute-domain ones only with compute domains on
// (0400_deviceclass-gpu.yaml L4-8, 0410_deviceclass-mig.yaml L4-8,
// 0420_deviceclass-compute-domains.yaml L1-18, 0430_deviceclass-vfio-gpu.yaml
// L4-8). Claims name them, so a different name or selector breaks every
// claim written for NVIDIA's operator.
func TestDeviceClassesMatchNVIDIA(t *testing.T) {
	upstream := map[string]*resourcev1.DeviceClass{}
	for _, o := range upstreamObjects(t, upstreamDeviceClasses) {
		dc, ok := o.(*resourcev1.DeviceClass)
		if !ok {
			t.Fatalf("%s holds a %T", upstreamDeviceClasses, o)
		}
		upstream[dc.Name] = dc
	}
	// 0420 L1: the compute-domain classes are behind compute domains.
	computeDomainOnly := []string{"compute-domain-daemon.nvidia.com", "compute-domain-default-channel.nvidia.com"}
	for _, cd := range []bool{false, true} {
		t.Run(fmt.Sprintf("computeDomains=%t", cd), func(t *testing.T) {
			g := NewWithT(t)
			in, _ := draInput(upstreamNamespace, cd, false)
			var want, got []string
			for name := range upstream {
				if cd || !slices.Contains(computeDomainOnly, name) {
					want = append(want, name)
				}
			}
			for _, o := range deviceClasses(in.Policy, cd) {
				dc := o.(*resourcev1.DeviceClass)
				got = append(got, dc.Name)
				up, ok := upstream[dc.Name]
				g.Expect(ok).To(BeTrue(), "NVIDIA has no DeviceClass %s", dc.Name)
				if !ok {
					continue
				}
				g.Expect(dc.Namespace).To(BeEmpty(), "DeviceClasses are cluster-scoped")
				g.Expect(dc.APIVersion).To(Equal(up.APIVersion), dc.Name)
				g.Expect(dc.Spec).To(Equal(up.Spec), "%s's selectors (%s)", dc.Name, upstreamDeviceClasses)
			}
			slices.Sort(want)
			slices.Sort(got)
			g.Expect(got).To(Equal(want), upstreamDeviceClasses)
		})
	}
}

// The drivers the classes select are the ones the plugins register: a
// class naming another driver selects nothing.
func TestDeviceClassesSelectThePluginsDrivers(t *testing.T) {
	g := NewWithT(t)
	in, _ := draInput(upstreamNamespace, true, false)
	for _, o := range deviceClasses(in.Policy, true) {
		expr := o.(*resourcev1.DeviceClass).Spec.Selectors[0].CEL.Expression
		g.Expect(expr).To(Or(
			HavePrefix("device.driver == '"+GPUDriverName+"' && device.attributes['"+GPUDriverName+"']."),
			HavePrefix("device.driver == '"+ComputeDomainDriverName+"' && device.attributes['"+ComputeDomainDriverName+"'].")),
			o.GetName())
	}
}
