package pluginconfig

import (
	"fmt"
	"strings"

	"sigs.k8s.io/yaml"
)

// Sharing is what a configuration makes of a node's GPUs.
type Sharing struct {
	// Replicas is how many pods share each GPU; 1 when not shared.
	Replicas int
	// Strategy is GFD's nvidia.com/gpu.sharing-strategy: none,
	// time-slicing or mps.
	Strategy string
	// Renamed is renameByDefault: the shared GPUs are advertised as
	// nvidia.com/gpu.shared, and GFD's product has no -SHARED suffix.
	Renamed bool
}

// NotShared is a configuration without sharing.
var NotShared = Sharing{Replicas: 1, Strategy: "none"}

// file is the part of a configuration file read here.
type file struct {
	Version string `json:"version"`
	Sharing struct {
		TimeSlicing *replicated `json:"timeSlicing"`
		MPS         *replicated `json:"mps"`
	} `json:"sharing"`
}

type replicated struct {
	RenameByDefault bool       `json:"renameByDefault"`
	Resources       []resource `json:"resources"`
}

type resource struct {
	Name     string `json:"name"`
	Replicas int    `json:"replicas"`
}

// Config is a configuration file, read.
type Config struct {
	Sharing Sharing
	// problem says why the operator cannot run it; "" when it can.
	problem string
}

// Parse reads a configuration file. An error says it is no configuration
// file the device plugin would start with.
func Parse(data string) (Config, error) {
	var f file
	if err := yaml.Unmarshal([]byte(data), &f); err != nil {
		return Config{}, fmt.Errorf("not a device plugin configuration file: %w", err)
	}
	if f.Version != "" && f.Version != "v1" {
		return Config{}, fmt.Errorf("unknown version %q: v1 is the only one", f.Version)
	}
	c := Config{Sharing: NotShared}
	r, strategy := f.Sharing.TimeSlicing, "time-slicing"
	if f.Sharing.MPS != nil {
		r, strategy = f.Sharing.MPS, "mps"
	}
	if r == nil {
		return c, nil
	}
	if len(r.Resources) == 0 {
		return Config{}, fmt.Errorf("sharing.%s lists no resources", strategy)
	}
	for _, res := range r.Resources {
		switch {
		case res.Name == "":
			return Config{}, fmt.Errorf("sharing.%s: a resource has no name", strategy)
		case res.Replicas < 2:
			return Config{}, fmt.Errorf("sharing.%s: resource %s has %d replicas, and the device plugin requires at least 2", strategy, res.Name, res.Replicas)
		}
		if strings.TrimPrefix(res.Name, "nvidia.com/") == "gpu" {
			c.Sharing = Sharing{Replicas: res.Replicas, Strategy: strategy, Renamed: r.RenameByDefault}
		}
	}
	if r.RenameByDefault && c.problem == "" {
		// The kubelet keeps the resource the plugin stops advertising at
		// capacity N, allocatable 0, for minutes: read as N unhealthy
		// GPUs, it would send the node through a repair.
		c.problem = "renameByDefault moves the GPUs to nvidia.com/gpu.shared, which this operator does not support yet"
	}
	return c, nil
}

// MPS reports whether the configuration shares GPUs with MPS: its nodes
// run the MPS control daemon, which the device plugin needs before it
// starts.
func (c Config) MPS() bool { return c.Sharing.Strategy == "mps" }

// Unsupported says why the operator does not run a configuration it read,
// or "".
func (c Config) Unsupported() string { return c.problem }
