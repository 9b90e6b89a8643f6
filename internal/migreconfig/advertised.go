package migreconfig

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/gpu-operator/gpu-operator/internal/migconfig"
)

// migResourcePrefix starts the resources of MIG devices under the mixed
// strategy.
const migResourcePrefix = "nvidia.com/mig-"

// Judge compares what a node's device plugin advertises (its allocatable
// GPU resources) and GFD's product label (empty where GFD does not run)
// with what a configuration's layout gives under the strategy. With the
// node's GPU count known (exact), counts must match; otherwise each
// resource the layout names must be advertised and no other MIG device:
// enough to catch an apply that reported success and made no MIG device,
// or left the old ones. Under a device plugin configuration (shared), the
// whole GPUs' resource may be renamed and multiplied: only MIG devices
// are checked.
func Judge(l migconfig.Layout, strategy string, allocatable map[string]int64, product string, exact, shared bool) (Advertised, string) {
	want, err := l.Resources(strategy)
	if err != nil {
		return Differs, err.Error()
	}
	if shared {
		exact = false
		delete(want, "nvidia.com/gpu")
		if strategy != "mixed" {
			want = map[string]int64{} // single: every device is nvidia.com/gpu, renamed or not
		}
	}
	for _, res := range slices.Sorted(maps.Keys(want)) {
		got, n := allocatable[res], want[res]
		switch {
		case got == 0:
			return Differs, fmt.Sprintf("the device plugin advertises no %s (%d expected)", res, n)
		case exact && got != n:
			return Differs, fmt.Sprintf("the device plugin advertises %d %s, not %d", got, res, n)
		}
	}
	for _, res := range slices.Sorted(maps.Keys(allocatable)) {
		if _, ok := want[res]; !ok && allocatable[res] > 0 && (strings.HasPrefix(res, migResourcePrefix) || (res == "nvidia.com/gpu" && !shared)) {
			return Differs, fmt.Sprintf("the device plugin advertises %d %s, which the configuration does not make", allocatable[res], res)
		}
	}
	if strategy != "mixed" && product != "" {
		// GFD names the MIG profile in the product under the single
		// strategy (k8s-device-plugin v0.20.0, internal/lm/mig-strategy.go):
		// whole GPUs and MIG devices both count as nvidia.com/gpu.
		// MIG enabled without devices on every GPU is INVALID to GFD.
		profiles := l.Profiles()
		switch {
		case len(profiles) == 1 && !strings.Contains(product, "-MIG-"+migconfig.ProfileName(profiles[0])):
			return Differs, fmt.Sprintf("GFD labels the product %s, not a MIG device of profile %s", product, profiles[0])
		case len(profiles) == 0 && l.WholeGPUs > 0 && strings.Contains(product, "-MIG-"):
			return Differs, fmt.Sprintf("GFD labels the product %s, a MIG device, where MIG is disabled", product)
		}
	}
	return Matches, ""
}

// Published is what NVIDIA's DRA driver publishes for a node in its
// ResourceSlices (draslices.Node): devices of type gpu, and MIG devices
// by profile. The driver publishes the MIG devices a GPU has when its
// kubelet plugin starts, and the GPU itself only while MIG is off
// (kubernetes-sigs/dra-driver-nvidia-gpu 95932046,
// cmd/gpu-kubelet-plugin/nvlib.go: enumerateAllPossibleDevices).
type Published struct {
	WholeGPUs  int
	MIGDevices map[string]int
}

// JudgeSlices compares what the DRA driver publishes with a
// configuration's layout. No MIG strategy applies: each MIG device is a
// device of its profile. With the node's GPU count known (exact), counts
// must match; otherwise each profile the layout names must be published
// and nothing it does not make. Profiles compare as mig-parted's file
// and go-nvlib's MigProfile.String write them (1g.18gb, 1g.10gb+me).
func JudgeSlices(l migconfig.Layout, got Published, exact bool) (Advertised, string) {
	if l.EmptyMIG > 0 {
		// Refused on DRA nodes: the driver would publish nothing of them.
		return Differs, fmt.Sprintf("the configuration leaves %d GPUs in MIG mode without MIG devices, which the DRA driver does not publish", l.EmptyMIG)
	}
	for _, profile := range l.Profiles() {
		have, want := got.MIGDevices[profile], l.MIGDevices[profile]
		switch {
		case have == 0:
			return Differs, fmt.Sprintf("the DRA driver's ResourceSlices name no MIG device of profile %s (%d expected)", profile, want)
		case exact && have != want:
			return Differs, fmt.Sprintf("the DRA driver's ResourceSlices name %d MIG devices of profile %s, not %d", have, profile, want)
		}
	}
	for _, profile := range slices.Sorted(maps.Keys(got.MIGDevices)) {
		if _, ok := l.MIGDevices[profile]; !ok && got.MIGDevices[profile] > 0 {
			return Differs, fmt.Sprintf("the DRA driver's ResourceSlices name %d MIG devices of profile %s, which the configuration does not make",
				got.MIGDevices[profile], profile)
		}
	}
	switch {
	case exact && got.WholeGPUs != l.WholeGPUs:
		return Differs, fmt.Sprintf("the DRA driver's ResourceSlices name %d whole GPUs, not %d", got.WholeGPUs, l.WholeGPUs)
	case l.WholeGPUs == 0 && got.WholeGPUs > 0:
		return Differs, fmt.Sprintf("the DRA driver's ResourceSlices name %d whole GPUs, which the configuration does not leave", got.WholeGPUs)
	case l.WholeGPUs > 0 && got.WholeGPUs == 0:
		return Differs, fmt.Sprintf("the DRA driver's ResourceSlices name no whole GPU (%d expected)", l.WholeGPUs)
	}
	return Matches, ""
}
