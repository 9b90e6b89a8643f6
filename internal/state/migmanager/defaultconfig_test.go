package migmanager

import (
	"slices"
	"testing"

	. "github.com/onsi/gomega"

	"github.com/gpu-operator/gpu-operator/internal/migconfig"
)

// entryFor is the entry of a configuration mig-parted applies to a GPU of
// a device ID: one whose device filter names it, or that has none.
func entryFor(g Gomega, f *migconfig.File, config, id string) migconfig.GPUEntry {
	for _, e := range f.MIGConfigs[config] {
		switch filter := e.DeviceFilter.(type) {
		case nil:
			return e
		case []any:
			if slices.Contains(filter, any(id)) {
				return e
			}
		default:
			g.Expect(filter).To(BeNil(), "%s: a device filter mig-parted reads is a list", config)
		}
	}
	g.Expect(config).To(BeEmpty(), "configuration %s has no entry for GPU %s", config, id)
	return migconfig.GPUEntry{}
}

// The default file parses as mig-parted reads it and gives every GPU
// family mig-manager v0.15 makes a configuration for each of its profiles
// alone, as many as fit, and a balanced layout, under NVIDIA's names:
// the A100 40GB, the A30, the H100 NVL, GH200 and B200 among them, which
// the file once refused.
func TestDefaultConfigCoversEveryMIGGPU(t *testing.T) {
	g := NewWithT(t)
	f, err := migconfig.Parse(DefaultConfig)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(f.Names()).To(ContainElements("all-disabled", "all-enabled", "all-balanced",
		"all-1g.5gb", "all-1g.6gb", "all-1g.12gb", "all-1g.10gb", "all-7g.80gb", "all-1g.18gb", "all-7g.141gb", "all-1g.23gb", "all-1g.10gb.me",
		"all-1g.24gb.gfx", "all-1g.24gb-me", "all-1g.24gb.me.all", "all-2g.48gb-me", "all-2g.48gb.me.all"))
	named := map[string]string{"A100-SXM4-40GB": "0x20B010DE", "A100-PCIE-40GB": "0x20B110DE", "A30": "0x20B710DE",
		"H100-NVL": "0x232110DE", "GH200-96GB": "0x234210DE", "GH200-144GB": "0x234810DE", "B200": "0x290110DE",
		"H100-80GB": "0x233010DE", "H200": "0x233510DE", "RTX-PRO-6000": "0x2BB510DE"}
	for gpu, id := range named {
		g.Expect(slices.ContainsFunc(migGPUs, func(m migGPU) bool { return slices.Contains(m.ids, id) })).To(BeTrue(), "%s (%s) is covered", gpu, id)
	}
	for _, gpu := range migGPUs {
		for _, id := range gpu.ids {
			for _, p := range gpu.profiles {
				e := entryFor(g, f, "all-"+migconfig.ProfileName(p.name), id)
				g.Expect(e.MIGEnabled).To(BeTrue())
				g.Expect(e.MIGDevices).To(Equal(map[string]int{p.name: p.max}), "%s on %s (%s)", p.name, gpu.name, id)
			}
			e := entryFor(g, f, "all-balanced", id)
			g.Expect(e.MIGDevices).To(Equal(gpu.balanced), "all-balanced on %s (%s)", gpu.name, id)
		}
	}
	// all-enabled enables MIG without devices; all-disabled disables it.
	g.Expect(f.MIGConfigs["all-enabled"]).To(Equal([]migconfig.GPUEntry{{Devices: "all", MIGEnabled: true, MIGDevices: map[string]int{}}}))
	g.Expect(f.MIGConfigs["all-disabled"]).To(Equal([]migconfig.GPUEntry{{Devices: "all"}}))
}

// The RTX PRO 6000's configurations NVIDIA's default file holds since
// mig-manager v0.13 are there, under NVIDIA's names ('+' written '.', '-'
// kept) and counts, for every GPU (gpu-operator v26.7.0,
// assets/state-mig-manager/0400_configmap.yaml; mig-parted v0.15.0,
// deployments/systemd/config-default.yaml): with v0.12.1 gone, the file
// covers every configuration NVIDIA's does.
func TestDefaultConfigHasRTXPROMediaConfigs(t *testing.T) {
	g := NewWithT(t)
	f, err := migconfig.Parse(DefaultConfig)
	g.Expect(err).NotTo(HaveOccurred())
	for name, devices := range map[string]map[string]int{
		"all-1g.24gb-me": {"1g.24gb-me": 4}, "all-1g.24gb.me.all": {"1g.24gb+me.all": 1},
		"all-2g.48gb-me": {"2g.48gb-me": 2}, "all-2g.48gb.me.all": {"2g.48gb+me.all": 1},
		"all-1g.24gb.gfx": {"1g.24gb+gfx": 4}, "all-2g.48gb.gfx": {"2g.48gb+gfx": 2}, "all-4g.96gb.gfx": {"4g.96gb+gfx": 1},
	} {
		g.Expect(f.MIGConfigs[name]).To(Equal([]migconfig.GPUEntry{{Devices: "all", MIGEnabled: true, MIGDevices: devices}}), name)
		g.Expect(f.Filtered(name)).To(BeFalse(), name)
	}
	l, err := f.LayoutOf("all-1g.24gb-me", 2)
	g.Expect(err).NotTo(HaveOccurred())
	res, err := l.Resources("mixed")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(res).To(Equal(map[string]int64{"nvidia.com/mig-1g.24gb-me": 8}))
	l, _ = f.LayoutOf("all-1g.24gb.me.all", 2)
	res, _ = l.Resources("mixed")
	g.Expect(res).To(Equal(map[string]int64{"nvidia.com/mig-1g.24gb.me.all": 2}))
}

// A configuration of one profile can be advertised under either strategy
// on every family that has it; a balanced one only under mixed.
func TestDefaultConfigUnderBothStrategies(t *testing.T) {
	g := NewWithT(t)
	f, err := migconfig.Parse(DefaultConfig)
	g.Expect(err).NotTo(HaveOccurred())
	for _, name := range f.Names() {
		for _, e := range f.MIGConfigs[name] {
			l := migconfig.Layout{MIGDevices: map[string]int{}}
			for p, n := range e.MIGDevices {
				l.MIGDevices[p] = 8 * n
			}
			if !e.MIGEnabled {
				l.WholeGPUs = 8
			}
			_, err := l.Resources("mixed")
			g.Expect(err).NotTo(HaveOccurred(), "%s under mixed", name)
			_, err = l.Resources("single")
			if name == "all-balanced" {
				g.Expect(err).To(HaveOccurred(), "a balanced layout under single")
			} else {
				g.Expect(err).NotTo(HaveOccurred(), "%s under single", name)
			}
		}
	}
	l, _ := f.LayoutOf("all-1g.18gb", 8)
	g.Expect(l.MIGDevices).To(Equal(map[string]int{"1g.18gb": 56}))
}

// Every profile is one the mig-manager shipped reads (one it cannot makes
// it refuse the whole file, all-disabled included); every family's are
// distinct and fit at least once, and its balanced layout uses its own.
func TestDefaultConfigProfileNames(t *testing.T) {
	g := NewWithT(t)
	for _, gpu := range migGPUs {
		seen := map[string]bool{}
		for _, p := range gpu.profiles {
			g.Expect(migconfig.CheckProfile(p.name)).To(Succeed(), gpu.name)
			g.Expect(seen[p.name]).To(BeFalse(), "%s lists %s twice", gpu.name, p.name)
			seen[p.name] = true
			g.Expect(p.max).To(BeNumerically(">", 0), gpu.name)
		}
		for p := range gpu.balanced {
			g.Expect(slices.ContainsFunc(gpu.profiles, func(m migProfile) bool { return m.name == p })).To(BeTrue(),
				"%s: balanced profile %s is one of its profiles", gpu.name, p)
		}
	}
}

// A family without device IDs can have no filtered entry: none of its
// profiles may be another family's.
func TestDefaultConfigUnnamedProfilesAreTheirOwn(t *testing.T) {
	for _, unnamed := range migGPUs {
		if len(unnamed.ids) > 0 {
			continue
		}
		for _, p := range unnamed.profiles {
			for _, gpu := range migGPUs {
				if len(gpu.ids) > 0 && slices.ContainsFunc(gpu.profiles, func(m migProfile) bool { return m.name == p.name }) {
					t.Errorf("%s, listed without a device, is also %s's", p.name, gpu.name)
				}
			}
		}
	}
}
