package pluginconfig

import (
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/google/uuid"
	"k8s.io/apimachinery/pkg/util/validation"
)

// The rules below are k8s-device-plugin v0.20.0's, which refuses to start
// on a file that breaks one (api/config/v1: config.go parseConfigFrom
// decodes the file into Config, whose fields validate themselves as they
// decode: flags.go, resources.go, replicas.go, duration.go). A file the
// operator judges runnable must be one the plugin starts with.

// plugin is the shape of the plugin's Config: decoding into it fails
// where the plugin's decoding fails on a type.
type plugin struct {
	Version string `json:"version"`
	Flags   struct {
		MigStrategy             *string `json:"migStrategy"`
		FailOnInitError         *bool   `json:"failOnInitError"`
		MpsRoot                 *string `json:"mpsRoot"`
		NvidiaDriverRoot        *string `json:"nvidiaDriverRoot"`
		NvidiaDevRoot           *string `json:"nvidiaDevRoot"`
		GDRCopyEnabled          *bool   `json:"gdrcopyEnabled"`
		GDSEnabled              *bool   `json:"gdsEnabled"`
		MOFEDEnabled            *bool   `json:"mofedEnabled"`
		UseNodeFeatureAPI       *bool   `json:"useNodeFeatureAPI"`
		DeviceDiscoveryStrategy *string `json:"deviceDiscoveryStrategy"`
		Plugin                  *struct {
			PassDeviceSpecs               *bool           `json:"passDeviceSpecs"`
			DeviceListStrategy            json.RawMessage `json:"deviceListStrategy"`
			DeviceIDStrategy              *string         `json:"deviceIDStrategy"`
			CDIAnnotationPrefix           *string         `json:"cdiAnnotationPrefix"`
			NvidiaCTKPath                 *string         `json:"nvidiaCTKPath"`
			ContainerDriverRoot           *string         `json:"containerDriverRoot"`
			SharedDevicesAllocationPolicy *string         `json:"sharedDevicesAllocationPolicy"`
		} `json:"plugin"`
		GFD *struct {
			Oneshot         *bool           `json:"oneshot"`
			NoTimestamp     *bool           `json:"noTimestamp"`
			SleepInterval   json.RawMessage `json:"sleepInterval"`
			OutputFile      *string         `json:"outputFile"`
			MachineTypeFile *string         `json:"machineTypeFile"`
		} `json:"gfd"`
	} `json:"flags"`
	Resources struct {
		GPUs []map[string]json.RawMessage `json:"gpus"`
		MIGs []map[string]json.RawMessage `json:"mig"`
	} `json:"resources"`
	Sharing struct {
		TimeSlicing json.RawMessage `json:"timeSlicing"`
		MPS         json.RawMessage `json:"mps"`
	} `json:"sharing"`
	Imex struct {
		ChannelIDs []int `json:"channelIDs"`
		Required   bool  `json:"required"`
	} `json:"imex"`
}

// check applies the rules that decoding into plugin does not.
func (p *plugin) check() error {
	if f := p.Flags.Plugin; f != nil && len(f.DeviceListStrategy) > 0 {
		var one string
		var many []string
		if json.Unmarshal(f.DeviceListStrategy, &one) != nil && json.Unmarshal(f.DeviceListStrategy, &many) != nil {
			return fmt.Errorf("flags.plugin.deviceListStrategy: invalid deviceListStrategy: %s", f.DeviceListStrategy)
		}
	}
	if f := p.Flags.GFD; f != nil && len(f.SleepInterval) > 0 {
		if err := checkDuration(f.SleepInterval); err != nil {
			return fmt.Errorf("flags.gfd.sleepInterval: %w", err)
		}
	}
	// In a fixed order: the first problem is what status shows, and a
	// message that changed from one reconcile to the next would be a write.
	for _, s := range []struct {
		section string
		list    []map[string]json.RawMessage
	}{{"resources.gpus", p.Resources.GPUs}, {"resources.mig", p.Resources.MIGs}} {
		for _, r := range s.list {
			if err := checkResource(r); err != nil {
				return fmt.Errorf("%s: %w", s.section, err)
			}
		}
	}
	return nil
}

func checkDuration(raw json.RawMessage) error {
	var v any
	if err := json.Unmarshal(raw, &v); err != nil {
		return err
	}
	switch d := v.(type) {
	case float64:
		return nil
	case string:
		if d == "infinite" {
			return nil
		}
		_, err := time.ParseDuration(d)
		return err
	}
	return errors.New("invalid duration")
}

func checkResource(r map[string]json.RawMessage) error {
	pattern, hasPattern := r["pattern"]
	name, hasName := r["name"]
	switch {
	case !hasPattern:
		return errors.New("resources must have a 'pattern' field set")
	case !hasName:
		return errors.New("resources must have a 'name' field set")
	}
	var s string
	if err := json.Unmarshal(pattern, &s); err != nil {
		return err
	}
	_, err := resourceName(name)
	return err
}

// resourceName reads a resource name as the plugin's NewResourceName does:
// nvidia.com/ is added when missing, the whole at most 63 characters, the
// name a DNS subdomain.
func resourceName(raw json.RawMessage) (string, error) {
	var n string
	if err := json.Unmarshal(raw, &n); err != nil {
		return "", err
	}
	if !strings.HasPrefix(n, "nvidia.com/") {
		n = "nvidia.com/" + n
	}
	if len(n) > 63 {
		return "", fmt.Errorf("fully-qualified resource name must be 63 characters or less: %v", n)
	}
	if invalid := validation.IsDNS1123Subdomain(strings.SplitN(n, "/", 2)[1]); len(invalid) > 0 {
		return "", fmt.Errorf("incorrect format for resource name '%v': %v", n, invalid)
	}
	return n, nil
}

// replicatedResource is one resource of a sharing section, read as the
// plugin's ReplicatedResource.UnmarshalJSON reads it.
func replicatedResource(raw json.RawMessage) (resource, error) {
	var rr map[string]json.RawMessage
	if err := json.Unmarshal(raw, &rr); err != nil {
		return resource{}, err
	}
	rawName, ok := rr["name"]
	if !ok {
		return resource{}, errors.New("a resource has no name")
	}
	name, err := resourceName(rawName)
	if err != nil {
		return resource{}, err
	}
	if devices, ok := rr["devices"]; ok {
		if err := checkDevices(devices); err != nil {
			return resource{}, fmt.Errorf("resource %s: %w", name, err)
		}
	}
	rawReplicas, ok := rr["replicas"]
	if !ok {
		return resource{}, fmt.Errorf("resource %s has no replicas", name)
	}
	var replicas int
	if err := json.Unmarshal(rawReplicas, &replicas); err != nil {
		return resource{}, fmt.Errorf("resource %s: %w", name, err)
	}
	if rename, ok := rr["rename"]; ok {
		if _, err := resourceName(rename); err != nil {
			return resource{}, fmt.Errorf("resource %s: rename: %w", name, err)
		}
	}
	return resource{Name: name, Replicas: replicas}, nil
}

// checkDevices reads a resource's devices as the plugin's
// ReplicatedDevices.UnmarshalJSON does: "all", a count above 0, or a list
// of GPU indices, MIG indices (gpu:mig) and GPU or MIG UUIDs.
func checkDevices(raw json.RawMessage) error {
	var all string
	if json.Unmarshal(raw, &all) == nil {
		if all != "all" {
			return fmt.Errorf("devices set as '%v' but the only valid string input is 'all'", all)
		}
		return nil
	}
	var count int
	if json.Unmarshal(raw, &count) == nil {
		if count <= 0 {
			return fmt.Errorf("devices set as '%v' but a count of devices must be > 0", count)
		}
		return nil
	}
	var list []json.RawMessage
	if json.Unmarshal(raw, &list) != nil {
		return fmt.Errorf("unrecognized type for devices spec: %s", raw)
	}
	for _, item := range list {
		var index uint64
		if json.Unmarshal(item, &index) == nil {
			continue
		}
		var ref string
		if json.Unmarshal(item, &ref) == nil && (isIndex(ref) || isMIGIndex(ref) || isUUID(ref)) {
			continue
		}
		return fmt.Errorf("unsupported device in devices list: %s", item)
	}
	return nil
}

func isIndex(s string) bool { _, err := strconv.ParseUint(s, 10, 0); return err == nil }

func isMIGIndex(s string) bool {
	gpu, mig, ok := strings.Cut(s, ":")
	return ok && isIndex(gpu) && isIndex(mig)
}

// isUUID: GPU-<uuid>, MIG-<uuid>, or MIG-GPU-<uuid>/<gi>/<ci>.
func isUUID(s string) bool {
	if rest, ok := strings.CutPrefix(s, "GPU-"); ok {
		_, err := uuid.Parse(rest)
		return err == nil
	}
	rest, ok := strings.CutPrefix(s, "MIG-")
	if !ok {
		return false
	}
	if _, err := uuid.Parse(rest); err == nil {
		return true
	}
	parts := strings.SplitN(rest, "/", 3)
	return len(parts) == 3 && isUUID(parts[0]) && strings.HasPrefix(parts[0], "GPU-") && isIndex(parts[1]) && isIndex(parts[2])
}
