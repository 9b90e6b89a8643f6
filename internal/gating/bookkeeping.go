package gating

import (
	"maps"
	"slices"
	"strings"
	"time"

	gpuv1 "github.com/gpu-operator/gpu-operator/api/v1"
	"github.com/gpu-operator/gpu-operator/internal/state"
)

// Annotations the operator keeps on each GPU node so that what it must
// remember survives its own restarts.
const (
	// AnnotationBootID is the node's boot ID when the operator last looked;
	// a different one means the node rebooted.
	AnnotationBootID = gpuv1.OperatorAnnotationPrefix + "boot-id"
	// AnnotationDriverPod is the UID of the driver pod last judged ready; a
	// ready pod with another UID means a new driver was loaded.
	AnnotationDriverPod = gpuv1.OperatorAnnotationPrefix + "driver-pod"
	// AnnotationNotBefore maps states to the time they were reset: their pod
	// counts as ready only once it became ready after that time.
	AnnotationNotBefore = gpuv1.OperatorAnnotationPrefix + "not-before"
	// AnnotationMissingSince maps ready states whose pod disappeared, or
	// whose proof of function lapsed, to when it did; the state stays ready
	// for the grace period.
	AnnotationMissingSince = gpuv1.OperatorAnnotationPrefix + "missing-since"
	// AnnotationFoundBy says why the operator took the node for a GPU node:
	// "nfd" (NFD found an NVIDIA device, and the operator's
	// nvidia.com/gpu.present goes when NFD's labels have been gone for the
	// grace) or "label" (a user set nvidia.com/gpu.present=true).
	AnnotationFoundBy = gpuv1.OperatorAnnotationPrefix + "found-by"
	// AnnotationNFDLostSince is when NFD's labels of a GPU node the
	// operator found by them went; gone again when they are back.
	AnnotationNFDLostSince = gpuv1.OperatorAnnotationPrefix + "nfd-lost-since"
	// AnnotationDiscoveredAt is when the operator first saw the GPU node.
	AnnotationDiscoveredAt = gpuv1.OperatorAnnotationPrefix + "discovered-at"
	// AnnotationBootedAt is when the operator saw the node's last reboot:
	// the time to ready after a reboot counts from it.
	AnnotationBootedAt = gpuv1.OperatorAnnotationPrefix + "booted-at"
)

// timeMap is a per-state set of times, kept in one annotation as
// "state=RFC3339,state=RFC3339" in state order.
type timeMap map[state.Name]time.Time

func parseTimeMap(s string) timeMap {
	m := timeMap{}
	for _, entry := range strings.Split(s, ",") {
		name, value, ok := strings.Cut(entry, "=")
		if !ok {
			continue
		}
		if t, err := time.Parse(time.RFC3339, value); err == nil {
			m[state.Name(name)] = t
		}
	}
	return m
}

func (m timeMap) String() string {
	names := slices.Sorted(maps.Keys(m))
	entries := make([]string, 0, len(names))
	for _, n := range names {
		entries = append(entries, string(n)+"="+m[n].UTC().Format(time.RFC3339))
	}
	return strings.Join(entries, ",")
}

// setIfNonEmpty puts value under key unless it is empty.
func setIfNonEmpty(into map[string]string, key, value string) {
	if value != "" {
		into[key] = value
	}
}
