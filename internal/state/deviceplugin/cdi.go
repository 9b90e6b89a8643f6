package deviceplugin

import (
	corev1 "k8s.io/api/core/v1"

	gpuv1 "github.com/gpu-operator/gpu-operator/api/v1"
	"github.com/gpu-operator/gpu-operator/internal/render"
	"github.com/gpu-operator/gpu-operator/internal/state"
	"github.com/gpu-operator/gpu-operator/internal/state/toolkit"
)

// cdiSettings are what the plugin needs to hand out GPUs by CDI name
// (k8s-device-plugin v0.20.0, cmd/nvidia-device-plugin/main.go and
// cmd/nvidia-device-plugin/plugin-manager.go): it writes its own spec
// (k8s.device-plugin.nvidia.com-gpu.json) to /var/run/cdi when it starts,
// from the driver root it loads NVML from, naming the toolkit's CDI hook
// by its host path; the annotation prefix is the one containerd and CRI-O
// read. NVIDIA's operator sets the same with CDI (object_controls.go,
// transformDevicePluginCtrForCDI).
//
// Without the operator's toolkit, the hook is where the host's toolkit put
// it (the plugin's default, /usr/bin/nvidia-ctk).
func cdiSettings(cp *gpuv1.ClusterPolicy, v state.Variant) ([]corev1.EnvVar, []corev1.VolumeMount, []corev1.Volume) {
	env := []corev1.EnvVar{
		{Name: "CDI_ANNOTATION_PREFIX", Value: "cdi.k8s.io/"},
		// Where the driver's device nodes are on the host: the plugin
		// takes its driver root otherwise, which GKE's installer leaves
		// without a /dev.
		{Name: "NVIDIA_DEV_ROOT", Value: toolkit.DevRootPath(&cp.Spec, v.DriverRoot)},
	}
	if cp.Spec.Toolkit.IsEnabled() {
		env = append(env, corev1.EnvVar{Name: "NVIDIA_CDI_HOOK_PATH", Value: toolkit.CDIHook(cp.Spec.ToolkitInstallDir())})
	}
	return env,
		[]corev1.VolumeMount{{Name: "cdi-root", MountPath: toolkit.CDISpecDir}},
		[]corev1.Volume{render.HostPathVolume("cdi-root", toolkit.CDISpecDir, corev1.HostPathDirectoryOrCreate)}
}
