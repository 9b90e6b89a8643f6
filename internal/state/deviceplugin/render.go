package deviceplugin

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	gpuv1 "github.com/gpu-operator/gpu-operator/api/v1"
	"github.com/gpu-operator/gpu-operator/internal/render"
	"github.com/gpu-operator/gpu-operator/internal/state"
)

// DaemonSetName is the name users know from the NVIDIA GPU Operator.
const DaemonSetName = "nvidia-device-plugin-daemonset"

// Operand renders the device-plugin state.
type Operand struct{}

// Enabled reports whether the policy deploys the device plugin.
func (Operand) Enabled(spec *gpuv1.ClusterPolicySpec) bool { return spec.DevicePlugin.IsEnabled() }

// Render returns the device plugin DaemonSet.
func (Operand) Render(in state.RenderInput) ([]client.Object, error) {
	spec := &in.Policy.Spec.DevicePlugin
	ds, err := render.DaemonSet(render.Workload{
		Policy:    in.Policy,
		Namespace: in.Namespace,
		Name:      DaemonSetName,
		State:     string(state.DevicePlugin),
		Component: &spec.ComponentSpec,
		Image:     render.Image(string(spec.Repository), string(spec.Image), string(spec.Version)),
		Gate:      in.Gate,
		Pod: corev1.PodSpec{
			AutomountServiceAccountToken: ptr.To(false),
			RuntimeClassName:             ptr.To(string(in.Policy.Spec.Operator.RuntimeClass)),
			Containers: []corev1.Container{{
				Name:            "nvidia-device-plugin",
				Command:         []string{"nvidia-device-plugin"},
				SecurityContext: &corev1.SecurityContext{Privileged: ptr.To(true)},
				Env: []corev1.EnvVar{
					{Name: "FAIL_ON_INIT_ERROR", Value: "true"},
					{Name: "PASS_DEVICE_SPECS", Value: "true"},
				},
				VolumeMounts: []corev1.VolumeMount{{Name: "device-plugins", MountPath: "/var/lib/kubelet/device-plugins"}},
			}},
			Volumes: []corev1.Volume{render.HostPathVolume("device-plugins", "/var/lib/kubelet/device-plugins", corev1.HostPathDirectory)},
		},
	})
	if err != nil {
		return nil, err
	}
	return []client.Object{ds}, nil
}
