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
// No configuration shares nothing. A file the binary would not start with,
// one that does not parse or that is not there, says the pod does not
// start (ok false), as the device plugin and GFD fail on it
// (k8s-device-plugin v0.20.0, api/config/v1/config.go: parseConfig). The
// lookup reads the file as it is now, where the real binaries read it
// once, at start: a pod mounting a ConfigMap a person edits would keep
// running what it read, the simulated one fails at once.
func SharingOf(pod *corev1.Pod, configs ConfigLookup) (s pluginconfig.Sharing, ok bool) {
	if pod == nil || configs == nil || len(pod.Spec.Containers) == 0 {
		return pluginconfig.NotShared, true
	}
	var file string
	for _, e := range pod.Spec.Containers[0].Env {
		if e.Name == "CONFIG_FILE" {
			file = e.Value
		}
	}
	if file == "" {
		return pluginconfig.NotShared, true
	}
	cm := configMapAt(pod, path.Dir(file))
	if cm == "" {
		return pluginconfig.NotShared, false
	}
	data, found := configs(pod.Namespace, cm, path.Base(file))
	if !found {
		return pluginconfig.NotShared, false
	}
	// The simulated plugin shares what the real one would, the
	// configurations the operator refuses to run included.
	c, err := pluginconfig.Parse(data)
	if err != nil {
		return pluginconfig.NotShared, false
	}
	return c.Sharing, true
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
