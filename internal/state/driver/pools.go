package driver

import (
	"slices"
	"strings"

	gpuv1 "github.com/gpu-operator/gpu-operator/api/v1"
	"github.com/gpu-operator/gpu-operator/internal/state"
)

// AnnotationVersion is on the driver pod template and so on each driver
// pod: the label-safe driver version it runs.
const AnnotationVersion = gpuv1.OperatorAnnotationPrefix + "driver-version"

// PoolOf returns the pool of a node: the first of driver.nodePools whose
// selector the node's labels match (the CRD rules out overlaps), or the
// default pool.
func PoolOf(spec *gpuv1.DriverSpec, labels map[string]string) string {
	for _, p := range spec.NodePools {
		if matches(p.NodeSelector, labels) {
			return p.Name
		}
	}
	return gpuv1.DefaultDriverPool
}

func matches(selector map[string]gpuv1.LabelValue, labels map[string]string) bool {
	for k, v := range selector {
		if got, ok := labels[k]; !ok || got != string(v) {
			return false
		}
	}
	return true
}

// VersionOf returns the driver version a pool pins.
func VersionOf(spec *gpuv1.DriverSpec, pool string) gpuv1.DriverVersion {
	for _, p := range spec.NodePools {
		if p.Name == pool && p.Version != "" {
			return p.Version
		}
	}
	return spec.Version
}

// Pools groups GPU nodes (by their labels) into pools, each with the
// operating systems found on its nodes, in a stable order: the pools of
// driver.nodePools as declared, then the default pool.
func Pools(spec *gpuv1.DriverSpec, nodeLabels []map[string]string) []state.DriverPool {
	oses := map[string]map[state.OSRelease]bool{}
	for _, labels := range nodeLabels {
		os, ok := state.OSReleaseOf(labels)
		if !ok {
			continue
		}
		pool := PoolOf(spec, labels)
		if oses[pool] == nil {
			oses[pool] = map[state.OSRelease]bool{}
		}
		oses[pool][os] = true
	}
	names := make([]string, 0, len(spec.NodePools)+1)
	for _, p := range spec.NodePools {
		names = append(names, p.Name)
	}
	names = append(names, gpuv1.DefaultDriverPool)
	var pools []state.DriverPool
	for _, name := range names {
		p := state.DriverPool{Name: name, Version: VersionOf(spec, name)}
		for os := range oses[name] {
			p.OSReleases = append(p.OSReleases, os)
		}
		slices.SortFunc(p.OSReleases, func(a, b state.OSRelease) int { return strings.Compare(a.String(), b.String()) })
		pools = append(pools, p)
	}
	return pools
}

// LabelValue is a driver version as a label value: label values cannot hold
// the colon of a digest, so sha256:<hex> becomes sha256-<hex>, cut to 63.
func LabelValue(v gpuv1.DriverVersion) string {
	s := strings.Replace(string(v), ":", "-", 1)
	if len(s) > 63 {
		s = s[:63]
	}
	return s
}
