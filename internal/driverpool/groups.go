package driverpool

import (
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"

	gpuv1 "github.com/gpu-operator/gpu-operator/api/v1"
	"github.com/gpu-operator/gpu-operator/internal/state"
	"github.com/gpu-operator/gpu-operator/internal/state/driver"
)

// Groups returns the pools the renderer deploys, each with the operating
// systems of the GPU nodes assigned to it: every pool that runs a driver,
// in the set's order, even one without nodes (its DaemonSets are then
// empty of OSes and render nothing but are known). A precompiled pool has
// kernels instead: the one each node runs its driver for, and the one it
// boots once that one's image is found.
func (s *Set) Groups(gpuNodes []corev1.Node) []state.DriverPool {
	nodes := make([]*corev1.Node, len(gpuNodes))
	for i := range gpuNodes {
		nodes[i] = &gpuNodes[i]
	}
	return s.GroupsOf(nodes, nil)
}

// GroupsOf is Groups of the nodes gpu keeps (every node, where gpu is
// nil): a caller with every node of a large fleet (the cache's own)
// filters them here rather than copying out the GPU nodes, 784 bytes
// each, at every render.
func (s *Set) GroupsOf(nodes []*corev1.Node, gpu func(*corev1.Node) bool) []state.DriverPool {
	if s == nil {
		return nil
	}
	oses := map[string]map[state.OSRelease]bool{}
	runs, wants := map[string]map[state.Kernel]bool{}, map[string]map[state.Kernel]bool{}
	add := func(m map[string]map[state.Kernel]bool, pool string, k state.Kernel) {
		if m[pool] == nil {
			m[pool] = map[state.Kernel]bool{}
		}
		m[pool][k] = true
	}
	for _, n := range nodes {
		if gpu != nil && !gpu(n) {
			continue
		}
		os, ok := state.OSReleaseOf(n.Labels)
		if !ok {
			continue
		}
		a := s.Assign(n.Name, n.Labels)
		if oses[a.Pool] == nil {
			oses[a.Pool] = map[state.OSRelease]bool{}
		}
		oses[a.Pool][os] = true
		if !RunsContainerDriver(n.Labels) {
			continue
		}
		if _, k, ok := s.runningKernel(n.Labels); ok && n.Labels[gpuv1.LabelDriverPool] == a.Pool {
			add(runs, a.Pool, k)
		}
		if a.Kernel != "" && a.AwaitsImage == "" {
			add(wants, a.Pool, state.Kernel{Version: a.Kernel, OS: os})
		}
	}
	var out []state.DriverPool
	for i := range s.Pools {
		p := &s.Pools[i]
		if !p.Runs {
			continue
		}
		g := state.DriverPool{Name: p.Name, NVIDIADriver: s.FromNVIDIADrivers, Driver: &p.Driver, Daemonsets: &p.Daemonsets,
			Precompiled: p.Precompiled, GDS: p.GDS, GDRCopy: p.GDRCopy}
		if p.Precompiled {
			g.Kernels, g.KeptKernels = s.kernels(p, runs[p.Name], wants[p.Name])
		}
		for os := range oses[p.Name] {
			g.OSReleases = append(g.OSReleases, os)
		}
		slices.SortFunc(g.OSReleases, func(a, b state.OSRelease) int { return strings.Compare(a.String(), b.String()) })
		out = append(out, g)
	}
	return out
}

// DaemonSetFor names the DaemonSet whose pod a node should run: its pool's,
// for its OS unless the pool pins a digest, and for its kernel in a
// precompiled pool. A driver pod of any other DaemonSet (a pool the node
// left, a digest switched to a tag, a kernel it no longer boots) is
// outdated and replaced through the upgrade. It is false when the node's
// pool runs no driver, when its OS, which the name needs, is not known,
// and when its kernel's precompiled image is not found (yet).
func (s *Set) DaemonSetFor(name string, labels map[string]string) (string, bool) {
	a := s.Assign(name, labels)
	p := s.Pool(a.Pool)
	if p == nil || !p.Runs {
		return "", false
	}
	os, ok := state.OSReleaseOf(labels)
	if p.Precompiled {
		if a.AwaitsImage != "" {
			return "", false
		}
		return driver.PrecompiledDaemonSetOf(p.Name, state.Kernel{Version: a.Kernel, OS: os}), true
	}
	return driver.DaemonSetOf(p.Name, p.Driver.Version, os, ok)
}

// NeedsOS reports whether the node's pool names an image per OS, so that
// its driver waits for NFD's OS labels.
func (s *Set) NeedsOS(name string, labels map[string]string) bool {
	p := s.Pool(s.Assign(name, labels).Pool)
	return p == nil || p.Precompiled || !driver.IsDigest(p.Driver.Version)
}

// WantedKernel is the value the node's nvidia.com/gpu.driver-kernel label
// should have: the kernel it boots in a precompiled pool once that
// kernel's image is found; until then the one it has; none outside
// precompiled pools. The node controller moves the label to it only where
// no driver pod would be replaced by the move, or in the upgrade's step
// that replaces the driver.
func (a Assignment) WantedKernel(labels map[string]string) string {
	switch {
	case a.Kernel != "" && a.AwaitsImage == "":
		return a.Kernel
	case a.AwaitsImage != "":
		return labels[gpuv1.LabelDriverKernel]
	}
	return ""
}

// Moves reports whether the node's driver DaemonSet changes by labels the
// node controller moves in the upgrade (its pool, its kernel): the
// DaemonSet the node leaves then deletes the old driver pod itself once
// the labels move, and deleting it first would make that DaemonSet start
// it again.
func (s *Set) Moves(name string, labels map[string]string) bool {
	if s == nil {
		return false
	}
	a := s.Assign(name, labels)
	if labels[gpuv1.LabelDriverPool] != a.Pool {
		return true
	}
	// The kernel selects a DaemonSet only within a precompiled pool: a
	// kernel label elsewhere (one left by a person) moves nothing.
	p := s.Pool(a.Pool)
	return p != nil && p.Precompiled && labels[gpuv1.LabelDriverKernel] != a.WantedKernel(labels)
}
