package gfd

import (
	"regexp"
	"strings"
)

// LabelPrefix is the prefix of every label GFD writes.
const LabelPrefix = "nvidia.com/"

// LabelNames matches the name (after LabelPrefix) of every label GFD
// v0.17.2 writes (k8s-device-plugin internal/lm), MIG profiles in the
// mixed strategy's keys included. nfd-master admits these and no other
// nvidia.com names; the cleanup of a deleted ClusterPolicy waits for them
// to leave the nodes before NFD goes.
const LabelNames = `gfd\.timestamp|cuda\.driver\.(major|minor|rev)|cuda\.runtime\.(major|minor)` +
	`|cuda\.driver-version\.(major|minor|revision|full)|cuda\.runtime-version\.(major|minor|full)` +
	`|mig\.(capable|strategy)|mps\.capable|vgpu\.(present|host-driver-version|host-driver-branch)` +
	`|gpu\.(machine|mode|clique|family|compute\.(major|minor))` +
	// Per GPU or per MIG profile.
	`|(gpu|mig-([0-9]+c\.)?[0-9]+g\.[0-9]+gb(\.me)?)\.(product|count|replicas|sharing-strategy|memory|multiprocessors` +
	`|slices\.(gi|ci)|engines\.(copy|decoder|encoder|jpeg|ofa))`

var labelName = regexp.MustCompile(`^(` + LabelNames + `)$`)

// IsLabel reports whether a node label is one GFD writes.
func IsLabel(key string) bool {
	name, ok := strings.CutPrefix(key, LabelPrefix)
	return ok && labelName.MatchString(name)
}
