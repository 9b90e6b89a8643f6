package state

import (
	"strings"

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
func DeviceListStrategy(spec *gpuv1.ClusterPolicySpec) string {
	strategy := DefaultDeviceListStrategy(spec)
	for _, e := range spec.DevicePlugin.Env {
		if e.Name == EnvDeviceListStrategy {
			strategy = e.Value
		}
	}
	return strategy
}

// HandsOutByCDI reports whether the device plugin hands out GPUs by CDI
// name: CDI is on and the plugin's strategy is a CDI one.
func HandsOutByCDI(spec *gpuv1.ClusterPolicySpec) bool {
	return spec.CDI.IsEnabled() && strings.Contains(DeviceListStrategy(spec), "cdi-")
}
