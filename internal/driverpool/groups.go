package driverpool

import (
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"

	"github.com/gpu-operator/gpu-operator/internal/state"
	"github.com/gpu-operator/gpu-operator/internal/state/driver"
)

// Groups returns the pools the renderer deploys, each with the operating
// systems of the GPU nodes assigned to it: every pool that runs a driver,
// in the set's order, even one without nodes (its DaemonSets are then
// empty of OSes and render nothing but are known).
func (s *Set) Groups(gpuNodes []corev1.Node) []state.DriverPool {
	if s == nil {
		return nil
	}
	oses := map[string]map[state.OSRelease]bool{}
	for i := range gpuNodes {
		n := &gpuNodes[i]
		os, ok := state.OSReleaseOf(n.Labels)
		if !ok {
			continue
		}
		pool := s.Assign(n.Name, n.Labels).Pool
		if oses[pool] == nil {
			oses[pool] = map[state.OSRelease]bool{}
		}
		oses[pool][os] = true
	}
	var out []state.DriverPool
	for i := range s.Pools {
		p := &s.Pools[i]
		if !p.Runs {
			continue
		}
		g := state.DriverPool{Name: p.Name, Driver: &p.Driver, Daemonsets: &p.Daemonsets}
		for os := range oses[p.Name] {
			g.OSReleases = append(g.OSReleases, os)
		}
		slices.SortFunc(g.OSReleases, func(a, b state.OSRelease) int { return strings.Compare(a.String(), b.String()) })
		out = append(out, g)
	}
	return out
}

// DaemonSetFor names the DaemonSet whose pod a node should run: its pool's,
// for its OS unless the pool pins a digest. A driver pod of any other
// DaemonSet (a pool the node left, a digest switched to a tag) is outdated
// and replaced through the upgrade. It is false when the node's pool runs
// no driver or its OS, which the name needs, is not known.
func (s *Set) DaemonSetFor(name string, labels map[string]string) (string, bool) {
	p := s.Pool(s.Assign(name, labels).Pool)
	if p == nil || !p.Runs {
		return "", false
	}
	os, ok := state.OSReleaseOf(labels)
	return driver.DaemonSetOf(p.Name, p.Driver.Version, os, ok)
}

// NeedsOS reports whether the node's pool names an image per OS, so that
// its driver waits for NFD's OS labels.
func (s *Set) NeedsOS(name string, labels map[string]string) bool {
	p := s.Pool(s.Assign(name, labels).Pool)
	return p == nil || !driver.IsDigest(p.Driver.Version)
}
