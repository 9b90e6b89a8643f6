package render

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"
)

// HostPathVolume is a volume of a path on the node.
func HostPathVolume(name, path string, t corev1.HostPathType) corev1.Volume {
	return corev1.Volume{Name: name, VolumeSource: corev1.VolumeSource{
		HostPath: &corev1.HostPathVolumeSource{Path: path, Type: ptr.To(t)},
	}}
}
