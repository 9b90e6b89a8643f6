package driverpool

import (
	"context"
	"fmt"

	"sigs.k8s.io/controller-runtime/pkg/client"

	gpuv1 "github.com/gpu-operator/gpu-operator/api/v1"
	gpuv1alpha1 "github.com/gpu-operator/gpu-operator/api/v1alpha1"
)

// Load resolves the policy's pools, listing the NVIDIADrivers (from the
// cache: there are a few) only when the policy hands the driver to them.
func Load(ctx context.Context, c client.Reader, cp *gpuv1.ClusterPolicy) (*Set, error) {
	if !cp.Spec.Driver.UsesNVIDIADrivers() {
		return FromPolicy(cp), nil
	}
	list := &gpuv1alpha1.NVIDIADriverList{}
	if err := c.List(ctx, list); err != nil {
		return nil, fmt.Errorf("listing NVIDIADrivers: %w", err)
	}
	return Resolve(cp, list.Items), nil
}
