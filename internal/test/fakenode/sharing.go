package fakenode

import (
	"path"

	corev1 "k8s.io/api/core/v1"

	"github.com/gpu-operator/gpu-operator/internal/pluginconfig"
)

// ConfigLookup returns a key of a ConfigMap, as the kubelet mounts it
// into a pod: the device plugin's configuration files. Nil looks up
// nothing.
type ConfigLookup func(namespace, configMap, key string) (string, bool)

// SharingOf reads how a pod's configuration shares the GPUs: the file its
// CONFIG_FILE names, in the ConfigMap mounted at that file's directory.
// No configuration, or one that cannot be read, shares nothing.
func SharingOf(pod *corev1.Pod, configs ConfigLookup) pluginconfig.Sharing {
	if pod == nil || configs == nil || len(pod.Spec.Containers) == 0 {
		return pluginconfig.NotShared
	}
	var file string
	for _, e := range pod.Spec.Containers[0].Env {
		if e.Name == "CONFIG_FILE" {
			file = e.Value
		}
	}
	cm := configMapAt(pod, path.Dir(file))
	if file == "" || cm == "" {
		return pluginconfig.NotShared
	}
	data, ok := configs(pod.Namespace, cm, path.Base(file))
	if !ok {
		return pluginconfig.NotShared
	}
	// The simulated plugin shares what the real one would, the
	// configurations the operator refuses to run included.
	c, err := pluginconfig.Parse(data)
	if err != nil {
		return pluginconfig.NotShared
	}
	return c.Sharing
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
