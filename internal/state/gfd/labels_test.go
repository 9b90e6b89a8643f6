package gfd

import "testing"

// GFD v0.20.0 names a MIG profile's labels after the profile, '+' written
// '.', so every attribute a MIG device can have reaches the label's name;
// names no profile can give, and labels that are not GFD's, stay out.
func TestIsLabelMIGProfiles(t *testing.T) {
	for key, want := range map[string]bool{
		"nvidia.com/gpu.count":                       true,
		"nvidia.com/mig-1g.10gb.count":               true,
		"nvidia.com/mig-1c.2g.10gb.product":          true,
		"nvidia.com/mig-1g.10gb.me.count":            true,
		"nvidia.com/mig-1g.24gb.me.all.count":        true,
		"nvidia.com/mig-2g.48gb.me.all.memory":       true,
		"nvidia.com/mig-1g.24gb-me.count":            true,
		"nvidia.com/mig-2g.48gb-me.slices.gi":        true,
		"nvidia.com/mig-1g.24gb.gfx.count":           true,
		"nvidia.com/mig-4g.96gb.gfx.engines.ofa":     true,
		"nvidia.com/mig-1g.24gb.gfx.replicas":        true,
		"nvidia.com/mig-1g.24gb-me.sharing-strategy": true,

		// Not a profile GFD can name.
		"nvidia.com/mig-1g.24gb+me.count":     false, // '+' is written '.'
		"nvidia.com/mig-1g.24gb-gfx.count":    false, // only -me lacks an attribute
		"nvidia.com/mig-1g.24gb-me.all.count": false,
		"nvidia.com/mig-1g.24gb.me.gfx.count": false, // one attribute at most
		"nvidia.com/mig-1g.24gb.me-me.count":  false,
		"nvidia.com/mig-1g.24gb.foo.count":    false,
		"nvidia.com/mig-1g.count":             false,
		"nvidia.com/mig-1g.24gb.me":           false, // no attribute label after it
		"nvidia.com/mig-1g.24gb.me.all":       false,
		// Not GFD's.
		"nvidia.com/mig.config":                       false,
		"nvidia.com/mig.config.state":                 false,
		"nvidia.com/gpu.deploy.device-plugin":         false,
		"nvidia.com/mig-1g.24gb-me.deploy":            false,
		"example.com/mig-1g.24gb-me.count":            false,
		"feature.node.kubernetes.io/pci-10de.present": false,
	} {
		if got := IsLabel(key); got != want {
			t.Errorf("IsLabel(%q) = %v, want %v", key, got, want)
		}
	}
}
