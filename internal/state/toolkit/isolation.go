package toolkit

import (
	"slices"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"

	gpuv1 "github.com/gpu-operator/gpu-operator/api/v1"
)

// How the device plugin tells the runtime which GPUs a container was
// allocated (k8s-device-plugin v0.20.0, cmd/nvidia-device-plugin/main.go
// --device-list-strategy, internal/plugin/server.go).
const (
	EnvDeviceListStrategy = "DEVICE_LIST_STRATEGY"
	// VolumeMountsStrategy passes the list as /dev/null mounts under
	// /var/run/nvidia-container-devices, which only the kubelet creates for
	// an allocation: a pod cannot name GPUs it was not given.
	VolumeMountsStrategy = "volume-mounts"
	// CDIStrategy passes CDI device names, in the container's annotations
	// (containerd 1.7 and CRI-O resolve them) and in the CRI request's CDI
	// devices (kubelets from 1.31), as NVIDIA's operator does with CDI; a
	// pod cannot set either itself.
	CDIStrategy = "cdi-annotations,cdi-cri"
)

// DefaultDeviceListStrategy is the device plugin's strategy unless the
// user sets one: by CDI name with CDI, by volume mounts without.
func DefaultDeviceListStrategy(spec *gpuv1.ClusterPolicySpec) string {
	if spec.CDI.IsEnabled() {
		return CDIStrategy
	}
	return VolumeMountsStrategy
}

// DeviceListStrategy is the device plugin's strategy: the one the user set
// in devicePlugin.env (the last, as the plugin's env takes it), else the
// default.
func DeviceListStrategy(cp *gpuv1.ClusterPolicy) string {
	strategy := DefaultDeviceListStrategy(&cp.Spec)
	for _, e := range cp.Spec.DevicePlugin.Env {
		if e.Name == EnvDeviceListStrategy {
			strategy = e.Value
		}
	}
	return strategy
}

// isolationEnv makes the runtime take GPU lists from the device plugin's
// volume mounts and ignore NVIDIA_VISIBLE_DEVICES in unprivileged
// containers, where otherwise any pod on a GPU node could set it to "all"
// and use every GPU without requesting one (nvidia-container-toolkit
// v1.20.0: cmd/nvidia-ctk-installer/toolkit/toolkit.go writes these to the
// runtime's config; internal/config/image/cuda_image.go VisibleDevices,
// which both the legacy hook and the CDI mode read, takes CDI annotations,
// then the mounts, and the variable only when the container holds
// CAP_SYS_ADMIN or the config accepts it). A device plugin the user set to pass lists
// through the variable needs the runtime to accept it, so the two follow
// the one choice; a user's toolkit.env still overrides either.
func isolationEnv(cp *gpuv1.ClusterPolicy) []corev1.EnvVar {
	envvar := slices.Contains(strings.Split(DeviceListStrategy(cp), ","), "envvar")
	return []corev1.EnvVar{
		{Name: "ACCEPT_NVIDIA_VISIBLE_DEVICES_ENVVAR_WHEN_UNPRIVILEGED", Value: strconv.FormatBool(envvar)},
		{Name: "ACCEPT_NVIDIA_VISIBLE_DEVICES_AS_VOLUME_MOUNTS", Value: "true"},
	}
}
