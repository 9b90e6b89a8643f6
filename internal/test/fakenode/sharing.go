package fakenode

import (
	"path"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"
)

// ConfigLookup returns a key of a ConfigMap, as the kubelet mounts it
// into a pod: the device plugin's configuration files. Nil looks up
// nothing.
type ConfigLookup func(namespace, configMap, key string) (string, bool)

// Sharing is what a device plugin (or GFD) configuration makes of the
// node's GPUs, as k8s-device-plugin v0.17.2 reads it
// (api/config/v1/sharing.go, replicas.go).
type Sharing struct {
	// Replicas is how many pods share each GPU; 1 when not shared.
	Replicas int
	// Strategy is GFD's nvidia.com/gpu.sharing-strategy: none,
	// time-slicing or mps.
	Strategy string
	// Renamed is renameByDefault: the shared GPUs are advertised as
	// nvidia.com/gpu.shared, and the product has no -SHARED suffix.
	Renamed bool
}

var notShared = Sharing{Replicas: 1, Strategy: "none"}

// pluginConfig is the part of a device plugin config file the simulator
// reads.
type pluginConfig struct {
	Sharing struct {
		TimeSlicing replicated  `json:"timeSlicing"`
		MPS         *replicated `json:"mps"`
	} `json:"sharing"`
}

type replicated struct {
	RenameByDefault bool `json:"renameByDefault"`
	Resources       []struct {
		Name     string `json:"name"`
		Replicas int    `json:"replicas"`
	} `json:"resources"`
}

// SharingOf reads how a pod's configuration shares the GPUs: the file its
// CONFIG_FILE names, in the ConfigMap mounted at that file's directory.
// No configuration, or one that cannot be read, shares nothing.
func SharingOf(pod *corev1.Pod, configs ConfigLookup) Sharing {
	if pod == nil || configs == nil || len(pod.Spec.Containers) == 0 {
		return notShared
	}
	var file string
	for _, e := range pod.Spec.Containers[0].Env {
		if e.Name == "CONFIG_FILE" {
			file = e.Value
		}
	}
	cm := configMapAt(pod, path.Dir(file))
	if file == "" || cm == "" {
		return notShared
	}
	data, ok := configs(pod.Namespace, cm, path.Base(file))
	if !ok {
		return notShared
	}
	var cfg pluginConfig
	if err := yaml.Unmarshal([]byte(data), &cfg); err != nil {
		return notShared
	}
	r, strategy := cfg.Sharing.TimeSlicing, "time-slicing"
	if cfg.Sharing.MPS != nil {
		r, strategy = *cfg.Sharing.MPS, "mps"
	}
	for _, res := range r.Resources {
		if strings.TrimPrefix(res.Name, "nvidia.com/") == "gpu" && res.Replicas > 1 {
			return Sharing{Replicas: res.Replicas, Strategy: strategy, Renamed: r.RenameByDefault}
		}
	}
	return notShared
}

// configMapAt names the ConfigMap a pod's first container mounts at dir.
func configMapAt(pod *corev1.Pod, dir string) string {
	for _, m := range pod.Spec.Containers[0].VolumeMounts {
		if m.MountPath != dir {
			continue
		}
		for _, v := range pod.Spec.Volumes {
			if v.Name == m.Name && v.ConfigMap != nil {
				return v.ConfigMap.Name
			}
		}
	}
	return ""
}
