package migconfig

import (
	"fmt"
	"strings"
	"testing"

	. "github.com/onsi/gomega"
)

const file = `version: v1
mig-configs:
  all-disabled:
    - devices: all
      mig-enabled: false
  all-1g.18gb:
    - devices: all
      mig-enabled: true
      mig-devices:
        "1g.18gb": 7
  half:
    - devices: all
      mig-enabled: false
    - devices: [0, 1, 2, 3]
      mig-enabled: true
      mig-devices:
        "1g.18gb": 7
  filtered:
    - device-filter: ["0x233510DE"]
      devices: all
      mig-enabled: true
      mig-devices:
        "3g.71gb": 2
`

func TestLayouts(t *testing.T) {
	g := NewWithT(t)
	f, err := Parse(file)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(f.Names()).To(Equal([]string{"all-1g.18gb", "all-disabled", "filtered", "half"}))

	l, err := f.LayoutOf("all-1g.18gb", 8)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(l).To(Equal(Layout{MIGDevices: map[string]int{"1g.18gb": 56}}))
	res, err := l.Resources("single")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(res).To(Equal(map[string]int64{"nvidia.com/gpu": 56}))

	l, err = f.LayoutOf("half", 8)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(l).To(Equal(Layout{WholeGPUs: 4, MIGDevices: map[string]int{"1g.18gb": 28}}), "a later entry overrides, per GPU")
	res, err = l.Resources("mixed")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(res).To(Equal(map[string]int64{"nvidia.com/gpu": 4, "nvidia.com/mig-1g.18gb": 28}))
	_, err = l.Resources("single")
	g.Expect(err).To(MatchError(ContainSubstring("mig.strategy mixed")))

	l, err = f.LayoutOf("all-disabled", 8)
	g.Expect(err).NotTo(HaveOccurred())
	res, _ = l.Resources("single")
	g.Expect(res).To(Equal(map[string]int64{"nvidia.com/gpu": 8}))

	me := Layout{MIGDevices: map[string]int{"1g.10gb+me": 8}}
	res, _ = me.Resources("mixed")
	g.Expect(res).To(Equal(map[string]int64{"nvidia.com/mig-1g.10gb.me": 8}), "a resource name holds no '+'")

	g.Expect(f.Filtered("filtered")).To(BeTrue())
	g.Expect(f.Filtered("half")).To(BeFalse())
	_, err = f.LayoutOf("all-2g", 8)
	g.Expect(err).To(MatchError(`no configuration "all-2g"; the file holds: all-1g.18gb, all-disabled, filtered, half`))
}

// Only MIG devices are lost to a reboot: MIG mode alone, or whole GPUs,
// have nothing to create again.
func TestPartitions(t *testing.T) {
	g := NewWithT(t)
	f, err := Parse(file + `  mode-only:
    - devices: all
      mig-enabled: true
      mig-devices: {}
`)
	g.Expect(err).NotTo(HaveOccurred())
	for name, want := range map[string]bool{"all-1g.18gb": true, "half": true, "filtered": true, "all-disabled": false, "mode-only": false, "absent": false} {
		g.Expect(f.Partitions(name)).To(Equal(want), name)
	}
}

func TestRefusedFiles(t *testing.T) {
	for name, tt := range map[string]struct{ data, want string }{
		"not YAML":        {"{", "not a mig-parted configuration file"},
		"unknown field":   {"version: v1\nmig-configs:\n  a:\n    - devices: all\n      mig-enable: true\n", "unknown field"},
		"other version":   {"version: v2\nmig-configs: {a: [{devices: all, mig-enabled: false}]}\n", `version is "v2"`},
		"empty":           {"version: v1\n", "holds no configuration"},
		"no devices":      {"version: v1\nmig-configs: {a: [{mig-enabled: false}]}\n", "mig-configs.a[0]: devices must be"},
		"bad index":       {"version: v1\nmig-configs: {a: [{devices: [-1], mig-enabled: false}]}\n", "list of GPU indexes"},
		"devices off":     {"version: v1\nmig-configs: {a: [{devices: all, mig-enabled: false, mig-devices: {1g.18gb: 7}}]}\n", "must be empty"},
		"none on":         {"version: v1\nmig-configs: {a: [{devices: all, mig-enabled: true}]}\n", "must be set where mig-enabled is true"},
		"negative device": {"version: v1\nmig-configs: {a: [{devices: all, mig-enabled: true, mig-devices: {1g.18gb: -1}}]}\n", "negative"},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := Parse(tt.data)
			NewWithT(t).Expect(err).To(MatchError(ContainSubstring(tt.want)))
		})
	}
}

// A long list of names is cut for a message, saying how many there are.
func TestHoldsCutsALongList(t *testing.T) {
	f := &File{MIGConfigs: map[string][]GPUEntry{}}
	for i := range 20 {
		f.MIGConfigs[fmt.Sprintf("c%02d", i)] = nil
	}
	if got, want := f.Holds(), "c00, c01, c02, c03, c04, c05, c06, c07, c08, c09, c10, c11, ... (20 in all)"; got != want {
		t.Errorf("Holds() = %q, want %q", got, want)
	}
	delete(f.MIGConfigs, "c19")
	for i := 12; i < 19; i++ {
		delete(f.MIGConfigs, fmt.Sprintf("c%02d", i))
	}
	if got := f.Holds(); got != "c00, c01, c02, c03, c04, c05, c06, c07, c08, c09, c10, c11" {
		t.Errorf("Holds() = %q, want every name", got)
	}
}

// A profile name mig-parted v0.15.0 cannot parse makes it refuse the whole
// file: CheckProfile refuses it, and accepts every name NVIDIA's default
// configuration holds, the RTX PRO 6000's +gfx, +me.all and -me included.
func TestCheckProfile(t *testing.T) {
	for profile, ok := range map[string]bool{
		// Read by v0.12.1 already.
		"1g.10gb": true, "1g.10gb+me": true, "1c.2g.10gb": true, "1c.1g.5gb+me": true, "1g.24gb+gfx": true, "1g.5gb+me,gfx": true,
		// Read from v0.13.0: attributes with dots, and the attributes a
		// profile lacks.
		"1g.24gb+me.all": true, "2g.48gb+me.all": true, "1g.24gb-me": true, "2g.48gb-me": true, "1g.24gb-me,gfx": true,
		"1g.5gb+A1.b2": true,
		// Not profiles.
		"": false, "1g": false, "g.10gb": false, "1g.10": false, "1g.10gb.": false, "a.b.c.d": false, "1c.2g.10gb.5": false,
		"1x.1g.5gb": false, " 1g.10gb": false, "1g.10gb ": false,
		// Bad attributes.
		"1g.10gb+": false, "1g.10gb-": false, "1g.10gb+2x": false, "1g.10gb+.me": false, "1g.10gb+me.": false,
		"1g.10gb+me,": false, "1g.10gb+me,me": false, "1g.10gb-me,me": false, "1g.10gb+m_e": false, "1g.10gb+m e": false,
		// '+' and '-' together, however placed.
		"1g.10gb+me-gfx": false, "1g.10gb-me+gfx": false, "1g.10gb+me.all-x": false,
	} {
		if err := CheckProfile(profile); (err == nil) != ok {
			t.Errorf("CheckProfile(%q) = %v, want ok=%v", profile, err, ok)
		}
	}
}

// '+' cannot be in a resource name: the device plugin writes it '.', and
// keeps '-'.
func TestMIGResourceNames(t *testing.T) {
	for profile, want := range map[string]string{
		"1g.10gb": "nvidia.com/mig-1g.10gb", "1g.10gb+me": "nvidia.com/mig-1g.10gb.me",
		"1g.24gb+me.all": "nvidia.com/mig-1g.24gb.me.all", "1g.24gb-me": "nvidia.com/mig-1g.24gb-me",
		"2g.48gb+gfx": "nvidia.com/mig-2g.48gb.gfx",
	} {
		if got := MIGResource(profile); got != want {
			t.Errorf("MIGResource(%q) = %q, want %q", profile, got, want)
		}
	}
}

// CheckProfile reads names users write: it never panics, and what it
// accepts has no space and attributes of one sign.
func FuzzCheckProfile(f *testing.F) {
	for _, seed := range []string{"1g.10gb", "1c.2g.10gb+me", "1g.24gb+me.all", "1g.24gb-me", "1g.5gb+me,gfx", "1g.10gb+-", ""} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, profile string) {
		if CheckProfile(profile) != nil {
			return
		}
		if strings.ContainsAny(profile, " \t\n") || (strings.Contains(profile, "+") && strings.Contains(profile, "-")) {
			t.Errorf("CheckProfile accepts %q", profile)
		}
	})
}

// Profiles compare as go-nvlib writes them; one that splits its GPU
// instance is known.
func TestCanonicalProfile(t *testing.T) {
	g := NewWithT(t)
	for in, want := range map[string]string{
		"1g.18gb": "1g.18gb", "1c.1g.18gb": "1g.18gb", "3c.3g.71gb+me": "3g.71gb+me", "1c.2g.35gb": "1c.2g.35gb",
		"1g.24gb-me": "1g.24gb-me", "7c.7g.141gb-me": "7g.141gb-me", "bad": "bad",
	} {
		g.Expect(CanonicalProfile(in)).To(Equal(want), in)
	}
	g.Expect(SplitsGPUInstance("1c.2g.35gb")).To(BeTrue())
	g.Expect(SplitsGPUInstance("2c.2g.35gb")).To(BeFalse())
	g.Expect(SplitsGPUInstance("2g.35gb+me")).To(BeFalse())

	f, err := Parse(`version: v1
mig-configs:
  c-written:
    - devices: all
      mig-enabled: true
      mig-devices: {"1c.1g.18gb": 7}
  empty:
    - devices: [0]
      mig-enabled: true
      mig-devices: {}
`)
	g.Expect(err).NotTo(HaveOccurred())
	l, err := f.LayoutOf("c-written", 2)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(l.MIGDevices).To(Equal(map[string]int{"1g.18gb": 14}))
	l, err = f.LayoutOf("empty", 2)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(l.EmptyMIG).To(Equal(1))
	g.Expect(l.WholeGPUs).To(Equal(1))
}
