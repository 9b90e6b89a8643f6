package clusterpolicy

import (
	"context"
	"testing"

	. "github.com/onsi/gomega"

	gpuv1 "github.com/gpu-operator/gpu-operator/api/v1"
)

// The DRA driver's health check publishes device taints that an API
// server without DRADeviceTaints drops: the policy says so, naming the
// field and the fix, only where the gate is set and the API server is
// known to drop them.
func TestDeviceTaintsMissing(t *testing.T) {
	tests := map[string]struct {
		gate      bool
		on, known bool
		missing   bool
	}{
		"health checked, taints dropped": {gate: true, known: true, missing: true},
		"health checked, taints kept":    {gate: true, on: true, known: true},
		"health checked, unknown":        {gate: true},
		"no health check":                {known: true},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			g := NewWithT(t)
			r := &Reconciler{DeviceTaints: func(context.Context) (bool, bool) { return tt.on, tt.known }}
			spec := &gpuv1.ClusterPolicySpec{}
			if tt.gate {
				spec.DRADriver.FeatureGates = map[string]bool{"NVMLDeviceHealthCheck": true}
			}
			msg := r.deviceTaintsMissing(context.Background(), spec)
			if !tt.missing {
				g.Expect(msg).To(BeEmpty())
				return
			}
			g.Expect(msg).To(HavePrefix("spec.draDriver.featureGates.NVMLDeviceHealthCheck is true but the API server drops"))
			g.Expect(msg).To(ContainSubstring("Enable DRADeviceTaints on kube-apiserver, kube-scheduler and kube-controller-manager"))
		})
	}
}
