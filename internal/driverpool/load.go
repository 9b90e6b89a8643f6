package driverpool

import (
	"context"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	gpuv1 "github.com/gpu-operator/gpu-operator/api/v1"
	gpuv1alpha1 "github.com/gpu-operator/gpu-operator/api/v1alpha1"
)

// Load resolves the policy's pools, listing the NVIDIADrivers (from the
// cache: there are a few) only when the policy hands the driver to them,
// with the GPUCluster, when there is one, over them. With a precompiled
// pool among them, it reads the verdicts of the image checks from checks;
// nil reads none, and every image is then unchecked.
func Load(ctx context.Context, c client.Reader, cp *gpuv1.ClusterPolicy, checks CheckPods) (*Set, error) {
	s := FromPolicy(cp)
	if cp.Spec.Driver.UsesNVIDIADrivers() {
		list := &gpuv1alpha1.NVIDIADriverList{}
		if err := c.List(ctx, list); err != nil {
			return nil, fmt.Errorf("listing NVIDIADrivers: %w", err)
		}
		s = Resolve(cp, list.Items)
	}
	gc := &gpuv1alpha1.GPUCluster{}
	switch err := c.Get(ctx, client.ObjectKey{Name: gpuv1alpha1.GPUClusterName}, gc); {
	case err == nil:
		s.Overlay(gc)
	case !apierrors.IsNotFound(err):
		return nil, fmt.Errorf("reading GPUCluster %s: %w", gpuv1alpha1.GPUClusterName, err)
	}
	if checks != nil && s.AnyPrecompiled() {
		var err error
		if s.Images, err = verdicts(checks); err != nil {
			return nil, err
		}
	}
	return s, nil
}
