package toolkit

import (
	corev1 "k8s.io/api/core/v1"
	nodev1 "k8s.io/api/node/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	gpuv1 "github.com/gpu-operator/gpu-operator/api/v1"
	"github.com/gpu-operator/gpu-operator/internal/render"
	"github.com/gpu-operator/gpu-operator/internal/state"
)

// DaemonSetName is the name users know from the NVIDIA GPU Operator.
const DaemonSetName = "nvidia-container-toolkit-daemonset"

// +kubebuilder:rbac:groups=node.k8s.io,resources=runtimeclasses,verbs=get;list;watch;create;update;patch;delete

// Operand renders the container-toolkit state.
type Operand struct{}

// Enabled reports whether the policy deploys the toolkit.
func (Operand) Enabled(spec *gpuv1.ClusterPolicySpec) bool { return spec.Toolkit.IsEnabled() }

// Render returns the toolkit DaemonSet.
func (Operand) Render(in state.RenderInput) ([]client.Object, error) {
	spec := &in.Policy.Spec.Toolkit
	ds, err := render.DaemonSet(render.Workload{
		Policy:    in.Policy,
		Namespace: in.Namespace,
		Name:      DaemonSetName,
		State:     string(state.ContainerToolkit),
		Component: &spec.ComponentSpec,
		Image:     render.Image(string(spec.Repository), string(spec.Image), string(spec.Version)),
		Gate:      in.Gate,
		Pod: corev1.PodSpec{
			HostPID:                      true,
			AutomountServiceAccountToken: ptr.To(false),
			Containers: []corev1.Container{{
				Name:            "nvidia-container-toolkit-ctr",
				SecurityContext: &corev1.SecurityContext{Privileged: ptr.To(true)},
				Env: []corev1.EnvVar{
					{Name: "RUNTIME", Value: string(in.Policy.Spec.Operator.DefaultRuntime)},
					{Name: "NVIDIA_DRIVER_ROOT", Value: "/run/nvidia/driver"},
				},
				VolumeMounts: []corev1.VolumeMount{{
					Name: "run-nvidia", MountPath: "/run/nvidia",
					MountPropagation: ptr.To(corev1.MountPropagationHostToContainer),
				}},
			}},
			Volumes: []corev1.Volume{render.HostPathVolume("run-nvidia", "/run/nvidia", corev1.HostPathDirectoryOrCreate)},
		},
	})
	if err != nil {
		return nil, err
	}
	return []client.Object{runtimeClass(in), ds}, nil
}

// runtimeClass is the RuntimeClass GPU pods name to run with the NVIDIA
// runtime handler the toolkit installs.
func runtimeClass(in state.RenderInput) *nodev1.RuntimeClass {
	name := string(in.Policy.Spec.Operator.RuntimeClass)
	return &nodev1.RuntimeClass{
		TypeMeta:   render.TypeMeta("node.k8s.io/v1", "RuntimeClass"),
		ObjectMeta: render.ObjectMeta(in.Policy, name, "", string(state.ContainerToolkit)),
		Handler:    "nvidia",
	}
}
