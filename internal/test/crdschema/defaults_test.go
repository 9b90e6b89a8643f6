package crdschema

import (
	"testing"

	. "github.com/onsi/gomega"

	gpuv1 "github.com/gpu-operator/gpu-operator/api/v1"
)

// Defaulting in tests fills in what the API server fills in; the CRD suite
// checks the API server's side.
func TestDefaulted(t *testing.T) {
	g := NewWithT(t)
	cp, err := Defaulted(&gpuv1.ClusterPolicy{})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(cp.Spec.Driver.Image).To(Equal(gpuv1.ImageName("driver")))
	g.Expect(cp.Spec.Driver.UpgradePolicy.MaxUnavailable.String()).To(Equal("25%"))
	g.Expect(*cp.Spec.NFD.Enabled).To(BeTrue())
	g.Expect(cp.Spec.Daemonsets.PriorityClassName).To(Equal(gpuv1.ObjectName("system-node-critical")))
}
