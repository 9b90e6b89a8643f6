package migconfig

import (
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"

	"sigs.k8s.io/yaml"
)

// FileKey is the ConfigMap key mig-manager reads (CONFIG_FILE).
const FileKey = "config.yaml"

// File is mig-parted's configuration file (mig-parted v0.15.0,
// api/spec/v1/spec.go): named configurations, each a list of settings
// for some of a node's GPUs.
type File struct {
	Version    string                `json:"version"`
	MIGConfigs map[string][]GPUEntry `json:"mig-configs"`
}

// GPUEntry sets the MIG mode and devices of the GPUs it selects.
type GPUEntry struct {
	// DeviceFilter limits the entry to GPUs of some PCI device IDs, such
	// as 0x233510DE: one ID or a list.
	DeviceFilter any `json:"device-filter,omitempty"`
	// Devices is "all" or a list of GPU indexes.
	Devices    any            `json:"devices"`
	MIGEnabled bool           `json:"mig-enabled"`
	MIGDevices map[string]int `json:"mig-devices,omitempty"`
}

// Parse reads a configuration file, refusing what mig-parted refuses: an
// unknown version or field, an entry without devices, MIG devices on a
// GPU with MIG disabled, or none on one with MIG enabled.
func Parse(data string) (*File, error) {
	var f File
	if err := yaml.UnmarshalStrict([]byte(data), &f); err != nil {
		return nil, fmt.Errorf("not a mig-parted configuration file: %w", err)
	}
	if f.Version != "v1" {
		return nil, fmt.Errorf("version is %q; mig-parted reads v1", f.Version)
	}
	if len(f.MIGConfigs) == 0 {
		return nil, fmt.Errorf("mig-configs holds no configuration")
	}
	for _, name := range f.Names() {
		for i, e := range f.MIGConfigs[name] {
			if err := e.check(); err != nil {
				return nil, fmt.Errorf("mig-configs.%s[%d]: %w", name, i, err)
			}
		}
	}
	return &f, nil
}

func (e GPUEntry) check() error {
	if _, err := e.indexes(); err != nil {
		return err
	}
	switch {
	case e.MIGEnabled && e.MIGDevices == nil:
		return fmt.Errorf("mig-devices must be set where mig-enabled is true ({} for none)")
	case !e.MIGEnabled && len(e.MIGDevices) > 0:
		return fmt.Errorf("mig-devices must be empty where mig-enabled is false")
	}
	for profile, n := range e.MIGDevices {
		if n < 0 {
			return fmt.Errorf("mig-devices.%s is negative", profile)
		}
	}
	return nil
}

// CheckProfile refuses a MIG profile name mig-parted v0.15.0 cannot parse.
// mig-parted checks every mig-devices key as it reads the file
// (api/spec/v1/spec.go, through the vendored go-nvlib v0.12.0,
// pkg/nvlib/device/mig_profile.go: parseMigProfile), so one such name
// makes it refuse the whole file, all-disabled included. A name is
// [<c>c.]<g>g.<gb>gb, then optionally '+' and the attributes the profile
// has, or '-' and those it lacks, never both: a comma-separated list of
// distinct attributes of letters, digits and dots that neither start with
// a digit or a dot nor end with a dot (1g.10gb+me, 1g.24gb+me.all,
// 1g.24gb-me). A user's file is not held to it, since a later mig-parted
// may read more; the operator's own file, which the mig-manager it ships
// reads, is.
func CheckProfile(profile string) error {
	const want = "want [<c>c.]<g>g.<gb>gb, then optionally +<attribute>,... or -<attribute>,... (1g.10gb, 1g.10gb+me, 1g.24gb-me)"
	plus, minus := strings.Contains(profile, "+"), strings.Contains(profile, "-")
	if plus && minus {
		return fmt.Errorf("MIG profile %q has both '+' and '-' attributes; %s", profile, want)
	}
	sep := "+"
	if minus {
		sep = "-"
	}
	fields, attrs, hasAttrs := strings.Cut(profile, sep)
	if err := checkProfileFields(fields); err != nil {
		return fmt.Errorf("MIG profile %q: %w; %s", profile, err, want)
	}
	if !hasAttrs {
		return nil
	}
	if err := checkProfileAttributes(attrs); err != nil {
		return fmt.Errorf("MIG profile %q: %w; %s", profile, err, want)
	}
	return nil
}

// checkProfileFields checks [<c>c.]<g>g.<gb>gb: each a decimal number
// followed by its unit.
func checkProfileFields(fields string) error {
	parts := strings.Split(fields, ".")
	units := []string{"g", "gb"}
	if len(parts) == 3 {
		units = []string{"c", "g", "gb"}
	}
	if len(parts) != len(units) {
		return fmt.Errorf("%q is not 2 or 3 fields separated by '.'", fields)
	}
	for i, part := range parts {
		n, ok := strings.CutSuffix(part, units[i])
		if _, err := strconv.Atoi(n); !ok || err != nil {
			return fmt.Errorf("%q is not a number followed by %q", part, units[i])
		}
	}
	return nil
}

// checkProfileAttributes checks a comma-separated attribute list as
// go-nvlib's parseMigProfileAttributes does.
func checkProfileAttributes(attrs string) error {
	seen := map[string]bool{}
	for _, a := range strings.Split(attrs, ",") {
		switch {
		case a == "":
			return fmt.Errorf("an attribute is empty")
		case seen[a]:
			return fmt.Errorf("attribute %q is listed twice", a)
		case a[0] >= '0' && a[0] <= '9':
			return fmt.Errorf("attribute %q starts with a digit", a)
		case a[0] == '.' || a[len(a)-1] == '.':
			return fmt.Errorf("attribute %q starts or ends with '.'", a)
		case strings.IndexFunc(a, func(r rune) bool {
			return (r < 'a' || r > 'z') && (r < 'A' || r > 'Z') && (r < '0' || r > '9') && r != '.'
		}) >= 0:
			return fmt.Errorf("attribute %q holds a character other than a letter, a digit or '.'", a)
		}
		seen[a] = true
	}
	return nil
}

// indexes returns the GPU indexes of the entry, nil for all of them.
func (e GPUEntry) indexes() ([]int, error) {
	switch d := e.Devices.(type) {
	case string:
		if d == "all" {
			return nil, nil
		}
	case []any:
		out := make([]int, 0, len(d))
		for _, v := range d {
			f, ok := v.(float64)
			if !ok || f < 0 || f != float64(int(f)) {
				return nil, fmt.Errorf("devices must be \"all\" or a list of GPU indexes; it holds %v", v)
			}
			out = append(out, int(f))
		}
		if len(out) > 0 {
			return out, nil
		}
	}
	return nil, fmt.Errorf("devices must be \"all\" or a list of GPU indexes, not %v", e.Devices)
}

// Names returns the configurations' names, sorted.
func (f *File) Names() []string { return slices.Sorted(maps.Keys(f.MIGConfigs)) }

// namesShown is how many names a message lists: the default file holds
// about ninety.
const namesShown = 12

// Holds lists the configurations' names for a message, sorted, the first
// few of a long list and how many there are in all.
func (f *File) Holds() string {
	names := f.Names()
	if len(names) <= namesShown {
		return strings.Join(names, ", ")
	}
	return fmt.Sprintf("%s, ... (%d in all)", strings.Join(names[:namesShown], ", "), len(names))
}

// Filtered reports whether any entry of a configuration applies to some
// GPU models only: what it gives a node then depends on the node's GPUs.
func (f *File) Filtered(name string) bool {
	return slices.ContainsFunc(f.MIGConfigs[name], func(e GPUEntry) bool { return e.DeviceFilter != nil })
}

// Partitions reports whether a configuration creates MIG devices on any
// GPU, whatever the GPU model: those are what a reboot or a driver reload
// destroys, where MIG mode alone survives.
func (f *File) Partitions(name string) bool {
	for _, e := range f.MIGConfigs[name] {
		for _, n := range e.MIGDevices {
			if e.MIGEnabled && n > 0 {
				return true
			}
		}
	}
	return false
}

// Layout is what a configuration makes of a node's GPUs.
type Layout struct {
	// WholeGPUs is how many GPUs have MIG disabled.
	WholeGPUs int
	// MIGDevices counts the node's MIG devices by profile, each written as
	// CanonicalProfile does (1g.18gb, ...).
	MIGDevices map[string]int
	// EmptyMIG is how many GPUs it puts in MIG mode without MIG devices.
	EmptyMIG int
}

// LayoutOf returns what a configuration makes of a node with gpus GPUs,
// every entry taken to apply (device filters are not read: the caller
// knows when a configuration is Filtered). A later entry for a GPU
// overrides an earlier one, as mig-parted applies them in order.
func (f *File) LayoutOf(name string, gpus int) (Layout, error) {
	entries, ok := f.MIGConfigs[name]
	if !ok {
		return Layout{}, fmt.Errorf("no configuration %q; the file holds: %s", name, f.Holds())
	}
	perGPU := make([]*GPUEntry, gpus)
	for i := range entries {
		idx, _ := entries[i].indexes()
		if idx == nil {
			for g := range perGPU {
				perGPU[g] = &entries[i]
			}
		}
		for _, g := range idx {
			if g < gpus {
				perGPU[g] = &entries[i]
			}
		}
	}
	l := Layout{MIGDevices: map[string]int{}}
	for _, e := range perGPU {
		if e == nil || !e.MIGEnabled {
			l.WholeGPUs++ // a GPU no entry names keeps MIG disabled
			continue
		}
		devices := 0
		for profile, n := range e.MIGDevices {
			if n > 0 {
				l.MIGDevices[CanonicalProfile(profile)] += n
				devices += n
			}
		}
		if devices == 0 {
			l.EmptyMIG++
		}
	}
	return l, nil
}

// Resources returns the resources the device plugin advertises for a
// layout under a MIG strategy (k8s-device-plugin v0.20.0,
// internal/rm/device_map.go): under mixed, whole GPUs as nvidia.com/gpu
// and each profile as nvidia.com/mig-<profile>; under single, whole GPUs
// or MIG devices of one profile as nvidia.com/gpu, never both. An error
// says why the plugin would not start.
func (l Layout) Resources(strategy string) (map[string]int64, error) {
	out := map[string]int64{}
	if strategy == "mixed" {
		if l.WholeGPUs > 0 {
			out["nvidia.com/gpu"] = int64(l.WholeGPUs)
		}
		for p, n := range l.MIGDevices {
			out[MIGResource(p)] = int64(n)
		}
		return out, nil
	}
	switch {
	case len(l.MIGDevices) == 0:
		if l.WholeGPUs > 0 {
			out["nvidia.com/gpu"] = int64(l.WholeGPUs)
		}
	case len(l.MIGDevices) > 1 || l.WholeGPUs > 0:
		return nil, fmt.Errorf("the single MIG strategy needs every GPU of a node partitioned into MIG devices of one profile; " +
			"this configuration mixes them: use mig.strategy mixed")
	default:
		for _, n := range l.MIGDevices {
			out["nvidia.com/gpu"] = int64(n)
		}
	}
	return out, nil
}

// MIGResource is the resource of a MIG profile under the mixed strategy:
// nvidia.com/mig-<ProfileName> (k8s-device-plugin v0.20.0,
// internal/rm/rm.go).
func MIGResource(profile string) string { return "nvidia.com/mig-" + ProfileName(profile) }

// ProfileName is a MIG profile as the device plugin and GFD name it in
// resources and labels, which cannot hold a '+': '+' written '.', '-'
// kept (1g.10gb+me is 1g.10gb.me, 1g.24gb+me.all 1g.24gb.me.all,
// 1g.24gb-me stays; k8s-device-plugin v0.20.0, internal/rm/rm.go and
// internal/resource/nvml-mig-device.go).
func ProfileName(profile string) string { return strings.ReplaceAll(profile, "+", ".") }

// CanonicalProfile writes a profile as go-nvlib's MigProfile.String does,
// which is how the device plugin, GFD and the DRA driver name it: the
// compute-instance count only where it differs from the GPU instance's
// (1c.1g.18gb is 1g.18gb; go-nvlib v0.12.0 pkg/nvlib/device/mig_profile.go,
// parseMigProfileFields and String). A profile that does not parse is
// returned as it is.
func CanonicalProfile(profile string) string {
	c, g, ok := computeSlices(profile)
	if !ok || c != g {
		return profile
	}
	_, rest, _ := strings.Cut(profile, ".")
	return rest
}

// SplitsGPUInstance reports whether a profile names fewer compute
// instances than its GPU instance has slices (1c.2g.20gb): the DRA driver
// knows no such profile, and stops at its start on a MIG device of one
// (kubernetes-sigs/dra-driver-nvidia-gpu 95932046,
// cmd/gpu-kubelet-plugin/nvlib.go: getGpuInfo skips them, getMigDevices
// then fails).
func SplitsGPUInstance(profile string) bool {
	c, g, ok := computeSlices(profile)
	return ok && c != g
}

// computeSlices reads <c>c.<g>g. at the start of a profile; ok is false
// where the profile names no compute-instance count.
func computeSlices(profile string) (c, g int, ok bool) {
	fields, _, _ := strings.Cut(strings.SplitN(profile, "+", 2)[0], "-")
	parts := strings.Split(fields, ".")
	if len(parts) != 3 {
		return 0, 0, false
	}
	cs, okC := strings.CutSuffix(parts[0], "c")
	gs, okG := strings.CutSuffix(parts[1], "g")
	c, errC := strconv.Atoi(cs)
	g, errG := strconv.Atoi(gs)
	return c, g, okC && okG && errC == nil && errG == nil
}

// ProfilesOf returns the MIG profiles every entry of a configuration
// creates devices of, device filters or not, as CanonicalProfile writes
// them, sorted.
func (f *File) ProfilesOf(name string) []string {
	set := map[string]bool{}
	for _, e := range f.MIGConfigs[name] {
		for profile, n := range e.MIGDevices {
			if e.MIGEnabled && n > 0 {
				set[CanonicalProfile(profile)] = true
			}
		}
	}
	return slices.Sorted(maps.Keys(set))
}

// Profiles returns the MIG profiles of a layout, sorted.
func (l Layout) Profiles() []string { return slices.Sorted(maps.Keys(l.MIGDevices)) }
