package pluginconfig

import (
	"encoding/json"
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

// replicated is a sharing section (timeSlicing, mps), read.
type replicated struct {
	RenameByDefault bool
	Resources       []resource
}

type resource struct {
	Name     string
	Replicas int
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
	var f plugin
	if err := yaml.Unmarshal([]byte(data), &f); err != nil {
		return Config{}, fmt.Errorf("not a device plugin configuration file: %w", err)
	}
	if f.Version != "" && f.Version != "v1" {
		return Config{}, fmt.Errorf("unknown version %q: v1 is the only one", f.Version)
	}
	if err := f.check(); err != nil {
		return Config{}, err
	}
	c := Config{Sharing: NotShared}
	var chosen *replicated
	strategy := ""
	// The plugin reads both sections; MPS wins where both are there.
	for _, s := range []struct {
		name string
		raw  []byte
	}{{"time-slicing", f.Sharing.TimeSlicing}, {"mps", f.Sharing.MPS}} {
		if len(s.raw) == 0 || string(s.raw) == "null" {
			continue
		}
		r, err := readReplicated(s.name, s.raw)
		if err != nil {
			return Config{}, err
		}
		chosen, strategy = r, s.name
	}
	if chosen == nil {
		return c, nil
	}
	for _, res := range chosen.Resources {
		if strings.TrimPrefix(res.Name, "nvidia.com/") == "gpu" {
			c.Sharing = Sharing{Replicas: res.Replicas, Strategy: strategy, Renamed: chosen.RenameByDefault}
		}
	}
	if chosen.RenameByDefault {
		// The kubelet keeps the resource the plugin stops advertising at
		// capacity N, allocatable 0, for minutes: read as N unhealthy
		// GPUs, it would send the node through a repair.
		c.problem = "renameByDefault moves the GPUs to nvidia.com/gpu.shared, which this operator does not support yet"
	}
	return c, nil
}

// readReplicated reads a sharing section as the plugin's
// ReplicatedResources.UnmarshalJSON does.
func readReplicated(strategy string, raw []byte) (*replicated, error) {
	var section map[string]json.RawMessage
	if err := json.Unmarshal(raw, &section); err != nil {
		return nil, fmt.Errorf("sharing.%s: %w", strategy, err)
	}
	r := &replicated{}
	if v, ok := section["renameByDefault"]; ok {
		if err := json.Unmarshal(v, &r.RenameByDefault); err != nil {
			return nil, fmt.Errorf("sharing.%s.renameByDefault: %w", strategy, err)
		}
	}
	if v, ok := section["failRequestsGreaterThanOne"]; ok {
		var b bool
		if err := json.Unmarshal(v, &b); err != nil {
			return nil, fmt.Errorf("sharing.%s.failRequestsGreaterThanOne: %w", strategy, err)
		}
	}
	var list []json.RawMessage
	if v, ok := section["resources"]; ok {
		if err := json.Unmarshal(v, &list); err != nil {
			return nil, fmt.Errorf("sharing.%s.resources: %w", strategy, err)
		}
	}
	if len(list) == 0 {
		return nil, fmt.Errorf("sharing.%s lists no resources", strategy)
	}
	for _, item := range list {
		res, err := replicatedResource(item)
		if err != nil {
			return nil, fmt.Errorf("sharing.%s: %w", strategy, err)
		}
		if res.Replicas < 2 {
			return nil, fmt.Errorf("sharing.%s: resource %s has %d replicas, and the device plugin requires at least 2", strategy,
				res.Name, res.Replicas)
		}
		r.Resources = append(r.Resources, res)
	}
	return r, nil
}

// MPS reports whether the configuration shares GPUs with MPS: its nodes
// run the MPS control daemon, which the device plugin needs before it
// starts.
func (c Config) MPS() bool { return c.Sharing.Strategy == "mps" }

// Unsupported says why the operator does not run a configuration it read,
// or "".
func (c Config) Unsupported() string { return c.problem }
