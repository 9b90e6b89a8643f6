package gfd

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	gpuv1 "github.com/gpu-operator/gpu-operator/api/v1"
	"github.com/gpu-operator/gpu-operator/internal/render"
	"github.com/gpu-operator/gpu-operator/internal/state"
)

// DaemonSetName is the name users know from the NVIDIA GPU Operator.
const DaemonSetName = "gpu-feature-discovery"

// Operand renders the gpu-feature-discovery state.
type Operand struct{}

// Enabled reports whether the policy deploys GFD.
func (Operand) Enabled(spec *gpuv1.ClusterPolicySpec) bool { return spec.GFD.IsEnabled() }

// Render returns the GFD DaemonSet.
func (Operand) Render(in state.RenderInput) ([]client.Object, error) {
	spec := &in.Policy.Spec.GFD
	ds, err := render.DaemonSet(render.Workload{
		Policy:    in.Policy,
		Namespace: in.Namespace,
		Name:      DaemonSetName,
		State:     string(state.GPUFeatureDiscovery),
		Component: &spec.ComponentSpec,
		Image:     render.Image(string(spec.Repository), string(spec.Image), string(spec.Version)),
		Gate:      in.Gate,
		Pod: corev1.PodSpec{
			AutomountServiceAccountToken: ptr.To(false),
			RuntimeClassName:             ptr.To(string(in.Policy.Spec.Operator.RuntimeClass)),
			Containers: []corev1.Container{{
				Name:         "gpu-feature-discovery",
				Command:      []string{"gpu-feature-discovery"},
				VolumeMounts: []corev1.VolumeMount{{Name: "features-d", MountPath: "/etc/kubernetes/node-feature-discovery/features.d"}},
			}},
			Volumes: []corev1.Volume{render.HostPathVolume("features-d", "/etc/kubernetes/node-feature-discovery/features.d", corev1.HostPathDirectoryOrCreate)},
		},
	})
	if err != nil {
		return nil, err
	}
	return []client.Object{ds}, nil
}
