package nfd

import (
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	gpuv1 "github.com/gpu-operator/gpu-operator/api/v1"
	"github.com/gpu-operator/gpu-operator/internal/render"
	"github.com/gpu-operator/gpu-operator/internal/state"
)

// Names of the NFD workloads.
const (
	WorkerName = "nfd-worker"
	MasterName = "nfd-master"
)

// Operand renders the node-feature-discovery state.
type Operand struct{}

// Enabled reports whether the policy deploys NFD.
func (Operand) Enabled(spec *gpuv1.ClusterPolicySpec) bool { return spec.NFD.IsEnabled() }

// Render returns nfd-master and the nfd-worker DaemonSet, which runs on
// every node: it is what finds the GPU nodes, so nothing gates it.
func (Operand) Render(in state.RenderInput) ([]client.Object, error) {
	spec := &in.Policy.Spec.NFD
	image := render.Image(string(spec.Repository), string(spec.Image), string(spec.Version))
	worker, err := render.DaemonSet(render.Workload{
		Policy:    in.Policy,
		Namespace: in.Namespace,
		Name:      WorkerName,
		State:     string(state.NodeFeatureDiscovery),
		Component: &spec.ComponentSpec,
		Image:     image,
		Pod: corev1.PodSpec{
			AutomountServiceAccountToken: ptr.To(false),
			Containers: []corev1.Container{{
				Name:    "nfd-worker",
				Command: []string{"nfd-worker"},
			}},
		},
	})
	if err != nil {
		return nil, err
	}
	return []client.Object{master(in, image), worker}, nil
}

func master(in state.RenderInput, image string) *appsv1.Deployment {
	spec := &in.Policy.Spec.NFD
	selector := render.SelectorLabels(MasterName)
	podLabels := render.SelectorLabels(MasterName)
	podLabels[render.LabelState] = string(state.NodeFeatureDiscovery)
	return &appsv1.Deployment{
		TypeMeta:   render.TypeMeta("apps/v1", "Deployment"),
		ObjectMeta: render.ObjectMeta(in.Policy, MasterName, in.Namespace, string(state.NodeFeatureDiscovery)),
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To[int32](1),
			Selector: &metav1.LabelSelector{MatchLabels: selector},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: podLabels},
				Spec: corev1.PodSpec{
					PriorityClassName: string(in.Policy.Spec.Daemonsets.PriorityClassName),
					Containers: []corev1.Container{{
						Name:            "nfd-master",
						Image:           image,
						ImagePullPolicy: spec.ImagePullPolicy,
						Command:         []string{"nfd-master"},
						Args:            append([]string{"-extra-label-ns=nvidia.com"}, spec.Args...),
						Env:             render.Env(nil, spec.Env),
					}},
				},
			},
		},
	}
}
