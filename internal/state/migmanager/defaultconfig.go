package migmanager

import (
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"

	"github.com/gpu-operator/gpu-operator/internal/migconfig"
)

// DefaultConfig is the configuration file of default-mig-parted-config,
// under NVIDIA's names: MIG off, or on without devices, on every GPU; each
// profile of each GPU family in migGPUs alone, as many as fit
// (all-1g.10gb, all-1g.10gb.me, all-1g.24gb-me, ...: '+' written '.');
// and all-balanced. A configuration whose profile fits a different number
// of times on different families (1g.10gb: 7 on an 80GB A100 or H100, 4
// on a 40GB A100) has an entry per family, filtered by device ID, as
// all-balanced has; the others carry no filter, as in NVIDIA's file: a
// configuration names its GPU's memory, and one applied to another GPU
// fails with mig-manager's error rather than doing nothing. Name a
// ConfigMap of your own in migManager.config.name for other layouts.
var DefaultConfig = defaultConfig(migGPUs)

// defaultConfig writes mig-parted's file by hand, in migGPUs' order, each
// family's configurations under a comment naming it: a YAML encoder would
// sort the names, and yaml.v2's sort of names mixing digits and letters
// depends on the order it is given them, which a map's is not.
func defaultConfig(gpus []migGPU) string {
	var b strings.Builder
	b.WriteString("version: v1\nmig-configs:\n")
	b.WriteString("  all-disabled:\n    - devices: all\n      mig-enabled: false\n")
	b.WriteString("  all-enabled:\n    - devices: all\n      mig-enabled: true\n      mig-devices: {}\n")
	// Each profile's families: a profile that fits as many times on each
	// gets one entry for all GPUs, another one entry per family.
	type fit struct {
		ids []string
		max int
	}
	fits := map[string][]fit{}
	for _, g := range gpus {
		for _, p := range g.profiles {
			fits[p.name] = append(fits[p.name], fit{g.ids, p.max})
		}
	}
	written := map[string]bool{}
	for _, g := range gpus {
		fmt.Fprintf(&b, "  # %s\n", g.name)
		for _, p := range g.profiles {
			if written[p.name] {
				continue
			}
			written[p.name] = true
			fmt.Fprintf(&b, "  all-%s:\n", migconfig.ProfileName(p.name))
			all := fits[p.name]
			if !slices.ContainsFunc(all, func(f fit) bool { return f.max != all[0].max }) {
				writeEntry(&b, nil, map[string]int{p.name: all[0].max})
				continue
			}
			for _, f := range all {
				writeEntry(&b, f.ids, map[string]int{p.name: f.max})
			}
		}
	}
	b.WriteString("  all-balanced:\n")
	for _, g := range gpus {
		if len(g.balanced) > 0 {
			fmt.Fprintf(&b, "    # %s\n", g.name)
			writeEntry(&b, g.ids, g.balanced)
		}
	}
	return b.String()
}

// writeEntry writes one entry of a configuration: MIG on for the GPUs the
// filter names (every GPU without one), with these devices.
func writeEntry(b *strings.Builder, filter []string, devices map[string]int) {
	b.WriteString("    - ")
	if filter != nil {
		quoted := make([]string, len(filter))
		for i, id := range filter {
			quoted[i] = strconv.Quote(id)
		}
		fmt.Fprintf(b, "device-filter: [%s]\n      ", strings.Join(quoted, ", "))
	}
	b.WriteString("devices: all\n      mig-enabled: true\n      mig-devices:\n")
	for _, profile := range slices.Sorted(maps.Keys(devices)) {
		fmt.Fprintf(b, "        %s: %d\n", strconv.Quote(profile), devices[profile])
	}
}

// GPUClientsKey is the key of the GPU clients file mig-manager reads
// (GPU_CLIENTS_FILE).
const GPUClientsKey = "clients.yaml"

// DefaultGPUClients is the file of default-gpu-clients: the host's
// services that hold the GPUs and that mig-manager stops while it applies
// a configuration on a node with the host's driver, as NVIDIA's lists them
// (gpu-operator v26.7.0, assets/state-mig-manager/0410_configmap.yaml).
const DefaultGPUClients = `version: v1
systemd-services:
  - nvsm.service
  - nvsm-mqtt.service
  - nvsm-core.service
  - nvsm-api-gateway.service
  - nvsm-notifier.service
  - nv_peer_mem.service
  - nvidia-dcgm.service
  - dcgm.service
  - dcgm-exporter.service
`
