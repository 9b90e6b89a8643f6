package deviceplugin

import (
	corev1 "k8s.io/api/core/v1"

	gpuv1 "github.com/gpu-operator/gpu-operator/api/v1"
	"github.com/gpu-operator/gpu-operator/internal/render"
	"github.com/gpu-operator/gpu-operator/internal/state/toolkit"
)

// WaitForCDISpecName is the init container that holds the plugin back
// until the node's management CDI spec names the driver that runs.
const WaitForCDISpecName = "wait-for-cdi-spec"

// waitForSpec waits until the management spec names the loaded driver: the
// plugin (and the states after it) asks the NVIDIA runtime for every GPU,
// which under CDI hands it that spec's files, and after a driver upgrade
// the toolkit, which stays, writes the spec again only once the new
// driver is loaded (toolkit.cdiRefresh). The order is decided on the node,
// where the files are, whatever the operator last read.
const waitForSpec = `until [ -e "$DRIVER_VERSION_FILE" ] && grep -qs "\.so\.$(cat "$DRIVER_VERSION_FILE")\$" "$SPEC"; do
  sleep 1
done`

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
func cdiSettings(cp *gpuv1.ClusterPolicy) ([]corev1.EnvVar, []corev1.VolumeMount, []corev1.Volume) {
	env := []corev1.EnvVar{{Name: "CDI_ANNOTATION_PREFIX", Value: "cdi.k8s.io/"}}
	if cp.Spec.Toolkit.IsEnabled() {
		env = append(env, corev1.EnvVar{Name: "NVIDIA_CDI_HOOK_PATH", Value: toolkit.CDIHook(cp.Spec.ToolkitInstallDir())})
	}
	return env,
		[]corev1.VolumeMount{{Name: "cdi-root", MountPath: toolkit.CDISpecDir}},
		[]corev1.Volume{render.HostPathVolume("cdi-root", toolkit.CDISpecDir, corev1.HostPathDirectoryOrCreate)}
}

// waitForCDISpec is the init container that runs waitForSpec, in the
// toolkit's image, for its shell. Only with the operator's toolkit, which
// writes the spec.
func waitForCDISpec(cp *gpuv1.ClusterPolicy) corev1.Container {
	tk := &cp.Spec.Toolkit
	return corev1.Container{
		Name:            WaitForCDISpecName,
		Image:           render.Image(string(tk.Repository), string(tk.Image), string(tk.Version)),
		ImagePullPolicy: tk.ImagePullPolicy,
		Command:         []string{"sh", "-c", waitForSpec},
		Env: []corev1.EnvVar{
			{Name: "SPEC", Value: toolkit.ManagementSpec},
			{Name: "DRIVER_VERSION_FILE", Value: toolkit.DriverVersionFile},
			{Name: "NVIDIA_VISIBLE_DEVICES", Value: "void"},
		},
		VolumeMounts: []corev1.VolumeMount{{Name: "cdi-root", MountPath: toolkit.CDISpecDir, ReadOnly: true}},
	}
}
