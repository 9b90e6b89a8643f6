package gfd

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	gpuv1 "github.com/gpu-operator/gpu-operator/api/v1"
	"github.com/gpu-operator/gpu-operator/internal/render"
	"github.com/gpu-operator/gpu-operator/internal/state"
)

// Names users know from the NVIDIA GPU Operator.
const (
	DaemonSetName      = "gpu-feature-discovery"
	ServiceAccountName = "nvidia-gpu-feature-discovery"
)

// FeaturesDir is where nfd-worker reads feature files from; GFD writes its
// labels (nvidia.com/gpu.product, gpu.memory, gpu.count, gpu.family, ...)
// there and nfd-master puts them on the node.
const FeaturesDir = "/etc/kubernetes/node-feature-discovery/features.d"

// Operand renders the gpu-feature-discovery state.
type Operand struct{}

// Enabled reports whether the policy deploys GFD.
func (Operand) Enabled(spec *gpuv1.ClusterPolicySpec) bool { return spec.GFD.IsEnabled() }

// Render returns GFD's ServiceAccount and DaemonSet. GFD ships in the device
// plugin image, with its own entrypoint.
func (Operand) Render(in state.RenderInput) ([]client.Object, error) {
	spec := &in.Policy.Spec.GFD
	ds, err := render.DaemonSet(in.Workload(DaemonSetName, state.GPUFeatureDiscovery, &spec.ComponentSpec,
		render.Image(string(spec.Repository), string(spec.Image), string(spec.Version)), podSpec(in.Policy)))
	if err != nil {
		return nil, err
	}
	return []client.Object{render.ServiceAccount(in.Policy, ServiceAccountName, in.Namespace, string(state.GPUFeatureDiscovery)), ds}, nil
}

// podSpec is GFD's pod. The GPUs come through the NVIDIA runtime class; GFD
// only queries NVML, so it runs unprivileged.
func podSpec(cp *gpuv1.ClusterPolicy) corev1.PodSpec {
	return corev1.PodSpec{
		ServiceAccountName:           ServiceAccountName,
		AutomountServiceAccountToken: ptr.To(false),
		RuntimeClassName:             ptr.To(string(cp.Spec.Operator.RuntimeClass)),
		Containers: []corev1.Container{{
			Name:    "gpu-feature-discovery",
			Command: []string{"gpu-feature-discovery"},
			Env: []corev1.EnvVar{
				{Name: "GFD_SLEEP_INTERVAL", Value: "60s"},
				{Name: "GFD_FAIL_ON_INIT_ERROR", Value: "true"},
				{Name: "GFD_OUTPUT_FILE", Value: FeaturesDir + "/gfd"},
				{Name: "MIG_STRATEGY", Value: "single"},
				{Name: "NVIDIA_VISIBLE_DEVICES", Value: "all"},
			},
			SecurityContext: &corev1.SecurityContext{
				Privileged:               ptr.To(false),
				AllowPrivilegeEscalation: ptr.To(false),
				Capabilities:             &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
			},
			VolumeMounts: []corev1.VolumeMount{{Name: "output-dir", MountPath: FeaturesDir}},
		}},
		Volumes: []corev1.Volume{render.HostPathVolume("output-dir", FeaturesDir, corev1.HostPathDirectoryOrCreate)},
	}
}

// Kinds lists the kinds Render returns.
func (Operand) Kinds() []schema.GroupVersionKind {
	return []schema.GroupVersionKind{render.KindServiceAccount, render.KindDaemonSet}
}
