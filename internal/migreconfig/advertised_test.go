package migreconfig

import (
	"testing"

	. "github.com/onsi/gomega"

	"github.com/gpu-operator/gpu-operator/internal/migconfig"
)

func TestJudge(t *testing.T) {
	oneG := migconfig.Layout{MIGDevices: map[string]int{"1g.18gb": 56}}
	whole := migconfig.Layout{WholeGPUs: 8, MIGDevices: map[string]int{}}
	mixed := migconfig.Layout{WholeGPUs: 4, MIGDevices: map[string]int{"1g.18gb": 28}}
	tests := map[string]struct {
		layout      migconfig.Layout
		strategy    string
		allocatable map[string]int64
		product     string
		exact       bool
		shared      bool
		want        Advertised
		why         string
	}{
		"single, MIG devices":           {layout: oneG, strategy: "single", allocatable: map[string]int64{"nvidia.com/gpu": 56}, product: "NVIDIA-H200-MIG-1g.18gb", want: Matches},
		"single, success and no device": {layout: oneG, strategy: "single", allocatable: map[string]int64{"nvidia.com/gpu": 8}, product: "NVIDIA-H200", want: Differs, why: "not a MIG device"},
		"single, counts off":            {layout: oneG, strategy: "single", allocatable: map[string]int64{"nvidia.com/gpu": 8}, exact: true, want: Differs, why: "advertises 8 nvidia.com/gpu, not 56"},
		"single, MIG off":               {layout: whole, strategy: "single", allocatable: map[string]int64{"nvidia.com/gpu": 8}, product: "NVIDIA-H200", exact: true, want: Matches},
		"single, MIG still on":          {layout: whole, strategy: "single", allocatable: map[string]int64{"nvidia.com/gpu": 56}, product: "NVIDIA-H200-MIG-1g.18gb", want: Differs, why: "where MIG is disabled"},
		"single, a mixed layout":        {layout: mixed, strategy: "single", allocatable: map[string]int64{}, want: Differs, why: "mig.strategy mixed"},
		"mixed":                         {layout: mixed, strategy: "mixed", allocatable: map[string]int64{"nvidia.com/gpu": 4, "nvidia.com/mig-1g.18gb": 28}, exact: true, want: Matches},
		"mixed, profile missing":        {layout: mixed, strategy: "mixed", allocatable: map[string]int64{"nvidia.com/gpu": 4}, want: Differs, why: "no nvidia.com/mig-1g.18gb"},
		"mixed, old profile left": {layout: mixed, strategy: "mixed", allocatable: map[string]int64{"nvidia.com/gpu": 4, "nvidia.com/mig-1g.18gb": 28, "nvidia.com/mig-2g.35gb": 3},
			want: Differs, why: "nvidia.com/mig-2g.35gb"},
		"mixed, old resource at 0": {layout: oneG, strategy: "mixed", allocatable: map[string]int64{"nvidia.com/gpu": 0, "nvidia.com/mig-1g.18gb": 56}, want: Matches},
		"MIG on, no device":        {layout: migconfig.Layout{MIGDevices: map[string]int{}}, strategy: "single", allocatable: map[string]int64{"nvidia.com/gpu": 0}, product: "NVIDIA-H200-MIG-INVALID", want: Matches},
		"MIG on, whole GPUs still": {layout: migconfig.Layout{MIGDevices: map[string]int{}}, strategy: "single", allocatable: map[string]int64{"nvidia.com/gpu": 8}, product: "NVIDIA-H200", want: Differs, why: "which the configuration does not make"},
		"media extensions, mixed": {layout: migconfig.Layout{MIGDevices: map[string]int{"1g.10gb+me": 8}}, strategy: "mixed",
			allocatable: map[string]int64{"nvidia.com/mig-1g.10gb.me": 8}, exact: true, want: Matches},
		"media extensions, single": {layout: migconfig.Layout{MIGDevices: map[string]int{"1g.10gb+me": 8}}, strategy: "single",
			allocatable: map[string]int64{"nvidia.com/gpu": 8}, product: "NVIDIA-H100-80GB-HBM3-MIG-1g.10gb.me", exact: true, want: Matches},
		"shared: renamed whole GPUs": {layout: mixed, strategy: "mixed", allocatable: map[string]int64{"nvidia.com/gpu.shared": 16, "nvidia.com/mig-1g.18gb": 28},
			shared: true, want: Matches},
		"shared: MIG devices missing": {layout: mixed, strategy: "mixed", allocatable: map[string]int64{"nvidia.com/gpu.shared": 16}, shared: true,
			want: Differs, why: "no nvidia.com/mig-1g.18gb"},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			g := NewWithT(t)
			got, why := Judge(tt.layout, tt.strategy, tt.allocatable, tt.product, tt.exact, tt.shared)
			g.Expect(got).To(Equal(tt.want), why)
			g.Expect(why).To(ContainSubstring(tt.why))
		})
	}
}

// On a DRA node the driver's slices are the word: whole GPUs and MIG
// devices by profile, no strategy.
func TestJudgeSlices(t *testing.T) {
	oneG := migconfig.Layout{MIGDevices: map[string]int{"1g.18gb": 56}}
	whole := migconfig.Layout{WholeGPUs: 8, MIGDevices: map[string]int{}}
	mixed := migconfig.Layout{WholeGPUs: 4, MIGDevices: map[string]int{"1g.18gb": 28}}
	tests := map[string]struct {
		layout migconfig.Layout
		got    Published
		exact  bool
		want   Advertised
		why    string
	}{
		"MIG devices":                 {layout: oneG, got: Published{MIGDevices: map[string]int{"1g.18gb": 56}}, exact: true, want: Matches},
		"whole GPUs":                  {layout: whole, got: Published{WholeGPUs: 8}, exact: true, want: Matches},
		"mixed, no strategy needed":   {layout: mixed, got: Published{WholeGPUs: 4, MIGDevices: map[string]int{"1g.18gb": 28}}, exact: true, want: Matches},
		"success and no MIG device":   {layout: oneG, got: Published{WholeGPUs: 8}, want: Differs, why: "no MIG device of profile 1g.18gb (56 expected)"},
		"counts off":                  {layout: oneG, got: Published{MIGDevices: map[string]int{"1g.18gb": 49}}, exact: true, want: Differs, why: "name 49 MIG devices of profile 1g.18gb, not 56"},
		"counts unknown, any will do": {layout: oneG, got: Published{MIGDevices: map[string]int{"1g.18gb": 7}}, want: Matches},
		"an old profile left":         {layout: oneG, got: Published{MIGDevices: map[string]int{"1g.18gb": 49, "7g.141gb": 1}}, want: Differs, why: "of profile 7g.141gb, which the configuration does not make"},
		"MIG still on":                {layout: whole, got: Published{MIGDevices: map[string]int{"1g.18gb": 56}}, want: Differs, why: "of profile 1g.18gb, which the configuration does not make"},
		"whole GPUs left":             {layout: oneG, got: Published{WholeGPUs: 1, MIGDevices: map[string]int{"1g.18gb": 49}}, want: Differs, why: "1 whole GPUs, which the configuration does not leave"},
		"whole GPUs counted off":      {layout: mixed, got: Published{WholeGPUs: 3, MIGDevices: map[string]int{"1g.18gb": 28}}, exact: true, want: Differs, why: "3 whole GPUs, not 4"},
		"whole GPUs all gone":         {layout: mixed, got: Published{MIGDevices: map[string]int{"1g.18gb": 28}}, want: Differs, why: "no whole GPU (4 expected)"},
		"media extensions":            {layout: migconfig.Layout{MIGDevices: map[string]int{"1g.18gb+me": 8}}, got: Published{MIGDevices: map[string]int{"1g.18gb+me": 8}}, exact: true, want: Matches},
		"MIG on, no device":           {layout: migconfig.Layout{MIGDevices: map[string]int{}, EmptyMIG: 8}, got: Published{}, exact: true, want: Differs, why: "leaves 8 GPUs in MIG mode without MIG devices"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			g := NewWithT(t)
			got, why := JudgeSlices(tc.layout, tc.got, tc.exact)
			g.Expect(got).To(Equal(tc.want), why)
			g.Expect(why).To(ContainSubstring(tc.why))
		})
	}
}
