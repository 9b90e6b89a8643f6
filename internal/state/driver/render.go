package driver

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	gpuv1 "github.com/gpu-operator/gpu-operator/api/v1"
	"github.com/gpu-operator/gpu-operator/internal/render"
	"github.com/gpu-operator/gpu-operator/internal/state"
)

// DaemonSetName is the name users know from the NVIDIA GPU Operator.
const DaemonSetName = "nvidia-driver-daemonset"

// Operand renders the driver state.
type Operand struct{}

// Enabled reports whether the policy deploys the driver.
func (Operand) Enabled(spec *gpuv1.ClusterPolicySpec) bool { return spec.Driver.IsEnabled() }

// Render returns the driver DaemonSet. Its update strategy is always
// OnDelete: the operator decides when a node's driver pod is replaced.
func (Operand) Render(in state.RenderInput) ([]client.Object, error) {
	spec := &in.Policy.Spec.Driver
	ds, err := render.DaemonSet(render.Workload{
		Policy:    in.Policy,
		Namespace: in.Namespace,
		Name:      DaemonSetName,
		State:     string(state.Driver),
		Component: &spec.ComponentSpec,
		Image:     render.Image(string(spec.Repository), string(spec.Image), string(spec.Version)),
		Gate:      in.Gate,
		OnDelete:  true,
		Pod: corev1.PodSpec{
			HostPID:                      true,
			AutomountServiceAccountToken: ptr.To(false),
			Containers: []corev1.Container{{
				Name:            "nvidia-driver-ctr",
				Command:         []string{"nvidia-driver"},
				Args:            []string{"init"},
				SecurityContext: &corev1.SecurityContext{Privileged: ptr.To(true)},
				VolumeMounts: []corev1.VolumeMount{{
					Name: "run-nvidia", MountPath: "/run/nvidia",
					MountPropagation: ptr.To(corev1.MountPropagationBidirectional),
				}},
			}},
			Volumes: []corev1.Volume{render.HostPathVolume("run-nvidia", "/run/nvidia", corev1.HostPathDirectoryOrCreate)},
		},
	})
	if err != nil {
		return nil, err
	}
	return []client.Object{ds}, nil
}
