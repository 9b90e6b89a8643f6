package gfd

import (
	"regexp"
	"strings"
)

// LabelPrefix is the prefix of every label GFD writes.
const LabelPrefix = "nvidia.com/"

// LabelNames matches the name (after LabelPrefix) of every label GFD
// v0.20.0 writes (k8s-device-plugin internal/lm), MIG profiles in the
// mixed strategy's keys included. nfd-master admits these and no other
// nvidia.com names; the cleanup of a deleted ClusterPolicy waits for them
// to leave the nodes before NFD goes.
const LabelNames = `gfd\.timestamp|cuda\.driver\.(major|minor|rev)|cuda\.runtime\.(major|minor)` +
	`|cuda\.driver-version\.(major|minor|revision|full)|cuda\.runtime-version\.(major|minor|full)` +
	`|mig\.(capable|strategy)|mps\.capable|vgpu\.(present|host-driver-version|host-driver-branch)` +
	`|gpu\.(machine|mode|clique|family|compute\.(major|minor))` +
	// Per GPU or per MIG profile.
	`|(gpu|mig-` + migProfileName + `)\.(product|count|replicas|sharing-strategy|memory|multiprocessors` +
	`|slices\.(gi|ci)|engines\.(copy|decoder|encoder|jpeg|ofa))`

// migProfileName matches a MIG profile as GFD names it in a label: the
// profile of a MIG device, [<c>c.]<g>g.<gb>gb with at most one attribute,
// '+' written '.' (k8s-device-plugin v0.20.0,
// internal/resource/nvml-mig-device.go: GetName). The profile is go-nvlib
// v0.12.0's (vendored, pkg/nvlib/device/mig_profile.go: NewMigProfile),
// which gives a profile at most one attribute, by its NVML GPU instance
// profile: +me (media extensions), +me.all (all of them), +gfx
// (graphics), or -me (none); so 1g.10gb.me, 1g.24gb.me.all, 1g.24gb.gfx
// and 1g.24gb-me, and never a list, whose ',' no label name can hold.
const migProfileName = `([0-9]+c\.)?[0-9]+g\.[0-9]+gb(\.me|\.me\.all|\.gfx|-me)?`

var labelName = regexp.MustCompile(`^(` + LabelNames + `)$`)

// IsLabel reports whether a node label is one GFD writes.
func IsLabel(key string) bool {
	name, ok := strings.CutPrefix(key, LabelPrefix)
	return ok && labelName.MatchString(name)
}
