package dcgmexporter

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	gpuv1 "github.com/gpu-operator/gpu-operator/api/v1"
	"github.com/gpu-operator/gpu-operator/internal/render"
	"github.com/gpu-operator/gpu-operator/internal/state"
)

// DaemonSetName is the name users know from the NVIDIA GPU Operator.
const DaemonSetName = "nvidia-dcgm-exporter"

// MetricsPort is where dcgm-exporter serves metrics.
const MetricsPort = 9400

// Operand renders the dcgm-exporter state.
type Operand struct{}

// Enabled reports whether the policy deploys dcgm-exporter.
func (Operand) Enabled(spec *gpuv1.ClusterPolicySpec) bool { return spec.DCGMExporter.IsEnabled() }

// Render returns the dcgm-exporter DaemonSet.
func (Operand) Render(in state.RenderInput) ([]client.Object, error) {
	spec := &in.Policy.Spec.DCGMExporter
	ds, err := render.DaemonSet(render.Workload{
		Policy:    in.Policy,
		Namespace: in.Namespace,
		Name:      DaemonSetName,
		State:     string(state.DCGMExporter),
		Component: &spec.ComponentSpec,
		Image:     render.Image(string(spec.Repository), string(spec.Image), string(spec.Version)),
		Gate:      in.Gate,
		Pod: corev1.PodSpec{
			AutomountServiceAccountToken: ptr.To(false),
			RuntimeClassName:             ptr.To(string(in.Policy.Spec.Operator.RuntimeClass)),
			Containers: []corev1.Container{{
				Name:  "nvidia-dcgm-exporter",
				Ports: []corev1.ContainerPort{{Name: "metrics", ContainerPort: MetricsPort}},
				SecurityContext: &corev1.SecurityContext{
					Capabilities: &corev1.Capabilities{Add: []corev1.Capability{"SYS_ADMIN"}},
				},
			}},
		},
	})
	if err != nil {
		return nil, err
	}
	return []client.Object{ds}, nil
}
