package render

import (
	"slices"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"
)

// HostPathVolume is a volume of a path on the node.
func HostPathVolume(name, path string, t corev1.HostPathType) corev1.Volume {
	return corev1.Volume{Name: name, VolumeSource: corev1.VolumeSource{
		HostPath: &corev1.HostPathVolumeSource{Path: path, Type: ptr.To(t)},
	}}
}

// ConfigMapVolume is a volume of a ConfigMap's entries.
func ConfigMapVolume(name, configMap string) corev1.Volume {
	return corev1.Volume{Name: name, VolumeSource: corev1.VolumeSource{
		ConfigMap: &corev1.ConfigMapVolumeSource{LocalObjectReference: corev1.LocalObjectReference{Name: configMap}},
	}}
}

// ReadOnlyHostMount mounts a host path volume read-only, seeing the mounts
// the host makes under it later: a driver root the driver container mounts
// after the pod started, or the host's / itself.
func ReadOnlyHostMount(name, at string) corev1.VolumeMount {
	return corev1.VolumeMount{Name: name, MountPath: at, ReadOnly: true, MountPropagation: ptr.To(corev1.MountPropagationHostToContainer)}
}

// AddVolumes adds volumes a pod does not have by name yet: steps that
// share a host directory (an init container's and the main container's)
// share its volume.
func AddVolumes(have []corev1.Volume, add ...corev1.Volume) []corev1.Volume {
	for _, v := range add {
		if !slices.ContainsFunc(have, func(h corev1.Volume) bool { return h.Name == v.Name }) {
			have = append(have, v)
		}
	}
	return have
}
