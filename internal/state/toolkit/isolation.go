package toolkit

import (
	"slices"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"

	gpuv1 "github.com/gpu-operator/gpu-operator/api/v1"
	"github.com/gpu-operator/gpu-operator/internal/state"
)

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
	envvar := slices.Contains(strings.Split(state.DeviceListStrategy(&cp.Spec), ","), "envvar")
	return []corev1.EnvVar{
		{Name: "ACCEPT_NVIDIA_VISIBLE_DEVICES_ENVVAR_WHEN_UNPRIVILEGED", Value: strconv.FormatBool(envvar)},
		{Name: "ACCEPT_NVIDIA_VISIBLE_DEVICES_AS_VOLUME_MOUNTS", Value: "true"},
	}
}
