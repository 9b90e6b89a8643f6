package state

import (
	"testing"

	"k8s.io/utils/ptr"

	gpuv1 "github.com/gpu-operator/gpu-operator/api/v1"
)

// GPUDirect's devices reach the plugins where the policy loads the
// modules, or any driver pool does (an NVIDIADriver's gds and gdrcopy).
func TestGPUDirectOfPolicyOrAnyPool(t *testing.T) {
	on := ptr.To(true)
	for name, tt := range map[string]struct {
		spec              gpuv1.ClusterPolicySpec
		pools             []DriverPool
		wantGDS, wantCopy bool
	}{
		"none":             {pools: []DriverPool{{Name: "a"}}},
		"the policy's gds": {spec: gpuv1.ClusterPolicySpec{GDS: &gpuv1.GPUDirectStorageSpec{Enabled: on}}, wantGDS: true},
		"a pool's gdrcopy": {pools: []DriverPool{{Name: "a"}, {Name: "b", GDRCopy: &gpuv1.GDRCopySpec{Enabled: on}}}, wantCopy: true},
		"a pool's gds":     {pools: []DriverPool{{Name: "b", GDS: &gpuv1.GPUDirectStorageSpec{Enabled: on}}}, wantGDS: true},
	} {
		in := RenderInput{Policy: &gpuv1.ClusterPolicy{Spec: tt.spec}, DriverPools: tt.pools}
		if gds, gdrcopy := in.GPUDirect(); gds != tt.wantGDS || gdrcopy != tt.wantCopy {
			t.Errorf("%s: gds %t gdrcopy %t, want %t %t", name, gds, gdrcopy, tt.wantGDS, tt.wantCopy)
		}
	}
}
