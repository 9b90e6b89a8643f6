package deviceplugin

import (
	"path"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	gpuv1 "github.com/gpu-operator/gpu-operator/api/v1"
	"github.com/gpu-operator/gpu-operator/internal/render"
	"github.com/gpu-operator/gpu-operator/internal/state"
	"github.com/gpu-operator/gpu-operator/internal/state/toolkit"
)

// Names users know from the NVIDIA GPU Operator.
const (
	DaemonSetName      = "nvidia-device-plugin-daemonset"
	ServiceAccountName = "nvidia-device-plugin"
)

// kubeletDir is where the kubelet looks for device plugin sockets. The
// kubelet deletes every socket there when it restarts; a plugin that does
// not notice is registered no more.
const kubeletDir = "/var/lib/kubelet/device-plugins"

// configDir is where the devicePlugin.config ConfigMap is mounted.
const configDir = "/config"

// Operand renders the device-plugin state.
type Operand struct{}

// Enabled reports whether the policy deploys the device plugin.
func (Operand) Enabled(spec *gpuv1.ClusterPolicySpec) bool { return spec.DevicePlugin.IsEnabled() }

// Render returns the plugin's ServiceAccount and DaemonSet.
func (Operand) Render(in state.RenderInput) ([]client.Object, error) {
	spec := &in.Policy.Spec.DevicePlugin
	ds, err := render.DaemonSet(in.Workload(DaemonSetName, state.DevicePlugin, &spec.ComponentSpec,
		render.Image(string(spec.Repository), string(spec.Image), string(spec.Version)), podSpec(in.Policy)))
	if err != nil {
		return nil, err
	}
	return []client.Object{render.ServiceAccount(in.Policy, ServiceAccountName, in.Namespace, string(state.DevicePlugin)), ds}, nil
}

// podSpec is the plugin's pod. It is privileged: it opens every GPU device
// node to health-check it and hands device specs to the kubelet.
func podSpec(cp *gpuv1.ClusterPolicy) corev1.PodSpec {
	env := []corev1.EnvVar{
		{Name: "FAIL_ON_INIT_ERROR", Value: "true"},
		{Name: "DEVICE_LIST_STRATEGY", Value: "envvar"},
		{Name: "DEVICE_ID_STRATEGY", Value: "uuid"},
		{Name: "MIG_STRATEGY", Value: "single"},
		{Name: "PASS_DEVICE_SPECS", Value: "true"},
		{Name: "NVIDIA_VISIBLE_DEVICES", Value: "all"},
		{Name: "NVIDIA_DRIVER_CAPABILITIES", Value: "all"},
		{Name: "NVIDIA_DRIVER_ROOT", Value: toolkit.DriverRoot},
		{Name: "CONTAINER_DRIVER_ROOT", Value: "/driver-root"},
	}
	mounts := []corev1.VolumeMount{
		{Name: "device-plugins", MountPath: kubeletDir},
		{Name: "driver-root", MountPath: "/driver-root", ReadOnly: true, MountPropagation: ptr.To(corev1.MountPropagationHostToContainer)},
	}
	volumes := []corev1.Volume{
		render.HostPathVolume("device-plugins", kubeletDir, corev1.HostPathDirectory),
		render.HostPathVolume("driver-root", toolkit.DriverRoot, corev1.HostPathDirectoryOrCreate),
	}
	if cfg := cp.Spec.DevicePlugin.Config; cfg != nil && cfg.Name != "" {
		mounts = append(mounts, corev1.VolumeMount{Name: "config", MountPath: configDir, ReadOnly: true})
		volumes = append(volumes, corev1.Volume{Name: "config", VolumeSource: corev1.VolumeSource{
			ConfigMap: &corev1.ConfigMapVolumeSource{LocalObjectReference: corev1.LocalObjectReference{Name: cfg.Name}},
		}})
		if cfg.Default != "" {
			env = append(env, corev1.EnvVar{Name: "CONFIG_FILE", Value: path.Join(configDir, cfg.Default)})
		}
	}
	return corev1.PodSpec{
		ServiceAccountName:           ServiceAccountName,
		AutomountServiceAccountToken: ptr.To(false),
		RuntimeClassName:             ptr.To(string(cp.Spec.Operator.RuntimeClass)),
		Containers: []corev1.Container{{
			Name:            "nvidia-device-plugin",
			Command:         []string{"nvidia-device-plugin"},
			Env:             env,
			SecurityContext: &corev1.SecurityContext{Privileged: ptr.To(true)},
			// The plugin's socket disappears when the kubelet restarts and
			// forgets it; restarting the plugin registers it again.
			LivenessProbe: &corev1.Probe{
				ProbeHandler: corev1.ProbeHandler{Exec: &corev1.ExecAction{
					Command: []string{"sh", "-c", "ls " + kubeletDir + "/nvidia-*.sock"},
				}},
				InitialDelaySeconds: 60, PeriodSeconds: 30, TimeoutSeconds: 5, FailureThreshold: 3,
			},
			VolumeMounts: mounts,
		}},
		Volumes: volumes,
	}
}

// Kinds lists the kinds Render returns.
func (Operand) Kinds() []schema.GroupVersionKind {
	return []schema.GroupVersionKind{render.KindServiceAccount, render.KindDaemonSet}
}
