package driverpool

import (
	"fmt"
	"slices"
	"strings"

	gpuv1 "github.com/gpu-operator/gpu-operator/api/v1"
	"github.com/gpu-operator/gpu-operator/internal/state"
	"github.com/gpu-operator/gpu-operator/internal/state/driver"
)

// ImageState is what the cluster found of a precompiled driver image.
type ImageState int

const (
	// ImageUnchecked: no check of the image has started.
	ImageUnchecked ImageState = iota
	// ImageChecking: its check pod has not pulled it yet.
	ImageChecking
	// ImageAvailable: a node pulled it.
	ImageAvailable
	// ImageMissing: a node could not pull it (no such tag, or no access).
	ImageMissing
)

// ImageVerdict is the state of an image and, when missing, what the
// kubelet said.
type ImageVerdict struct {
	State   ImageState
	Message string
}

// PrecompiledImage is the image of a precompiled pool's driver for a
// kernel on an OS.
func (p *Pool) PrecompiledImage(k state.Kernel) string { return driver.PrecompiledImage(&p.Driver, k) }

// precompiled fills in the kernel and image of a node of a precompiled
// pool, and says when its driver must wait: the kernel or OS not known,
// or the image not found yet. A node that waits keeps the driver it runs.
func (s *Set) precompiled(a Assignment, p *Pool, labels map[string]string) Assignment {
	os, osKnown := state.OSReleaseOf(labels)
	k := state.Kernel{Version: labels[state.LabelKernelVersion], OS: os}
	switch {
	case k.Version == "":
		a.AwaitsImage = fmt.Sprintf("no precompiled driver image for this node: its kernel is unknown (label %s is missing; "+
			"is NFD running? NFD leaves the label out when the version is longer than 63 characters)", state.LabelKernelVersion)
		return a
	case !osKnown:
		a.AwaitsImage = fmt.Sprintf("no precompiled driver image for this node: its OS is unknown (labels %s and %s are missing; is NFD running?)",
			state.LabelOSReleaseID, state.LabelOSVersionID)
		return a
	}
	a.Kernel, a.Image = k.Version, p.PrecompiledImage(k)
	switch v := s.Images[a.Image]; v.State {
	case ImageAvailable:
	case ImageMissing:
		a.ImageMissing = true
		a.AwaitsImage = fmt.Sprintf("no precompiled driver image for kernel %s: %s cannot be pulled (%s). "+
			"The node keeps the driver it runs; boot a kernel NVIDIA publishes images for, or use a driver version without usePrecompiled",
			k.Version, a.Image, v.Message)
	default:
		a.AwaitsImage = fmt.Sprintf("checking that the precompiled driver image %s for kernel %s can be pulled", a.Image, k.Version)
	}
	return a
}

// kernels returns the kernels a precompiled pool renders a DaemonSet for,
// and those whose DaemonSet stays as it is. A DaemonSet is rendered only
// for an image a check pulled: the kernel each node runs (its
// nvidia.com/gpu.driver-kernel label) and the one it boots, once found.
// A kernel a node runs whose image under the pool's settings is not found
// (a new branch not pulled yet, or an OS upgraded under the label) keeps
// its DaemonSet as it is, if it has one.
func (s *Set) kernels(p *Pool, runs, wants map[state.Kernel]bool) (rendered, kept []state.Kernel) {
	for k := range runs {
		if s.Images[p.PrecompiledImage(k)].State == ImageAvailable {
			rendered = append(rendered, k)
		} else {
			kept = append(kept, k)
		}
	}
	for k := range wants {
		if !runs[k] {
			rendered = append(rendered, k)
		}
	}
	byOSAndVersion := func(a, b state.Kernel) int {
		if c := strings.Compare(a.OS.String(), b.OS.String()); c != 0 {
			return c
		}
		return strings.Compare(a.Version, b.Version)
	}
	slices.SortFunc(rendered, byOSAndVersion)
	slices.SortFunc(kept, byOSAndVersion)
	return rendered, kept
}

// RunsContainerDriver reports whether a GPU node may run the driver
// container: not on its host's driver, and not opted out of it. Only such
// nodes count towards a precompiled pool's kernels and image checks.
func RunsContainerDriver(labels map[string]string) bool {
	return labels[gpuv1.LabelDriverRoot] != string(gpuv1.DriverRootHost) &&
		labels[gpuv1.DeployLabel(string(state.Driver))] != "false"
}

// runningKernel is the kernel a node of a precompiled pool runs its
// driver for, from the operator's label, with the node's OS and its pool;
// false when it has none.
func (s *Set) runningKernel(labels map[string]string) (*Pool, state.Kernel, bool) {
	os, ok := state.OSReleaseOf(labels)
	k := state.Kernel{Version: labels[gpuv1.LabelDriverKernel], OS: os}
	p := s.Pool(labels[gpuv1.LabelDriverPool])
	return p, k, ok && k.Version != "" && p != nil && p.Precompiled
}

// RunningImage is the precompiled image a node's driver runs, by its pool
// and kernel labels; false outside precompiled pools.
func (s *Set) RunningImage(labels map[string]string) (string, bool) {
	p, k, ok := s.runningKernel(labels)
	if !ok {
		return "", false
	}
	return p.PrecompiledImage(k), true
}
