package gfd

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	gpuv1 "github.com/gpu-operator/gpu-operator/api/v1"
	"github.com/gpu-operator/gpu-operator/internal/render"
	"github.com/gpu-operator/gpu-operator/internal/state"
	"github.com/gpu-operator/gpu-operator/internal/state/deviceplugin"
)

// Names users know from the NVIDIA GPU Operator.
const (
	DaemonSetName      = "gpu-feature-discovery"
	ServiceAccountName = "nvidia-gpu-feature-discovery"
	// ContainerName is GFD's container.
	ContainerName = "gpu-feature-discovery"
)

// FeaturesDir is where nfd-worker reads feature files from; GFD writes its
// labels (nvidia.com/gpu.product, gpu.memory, gpu.count, gpu.family, ...)
// there and nfd-master puts them on the node.
const FeaturesDir = "/etc/kubernetes/node-feature-discovery/features.d"

// dimensions: GFD loads NVML as the runtime injects it, through the
// RuntimeClass where the runtime has the NVIDIA handler, and reads the
// device plugin's configuration of the node, to label what it advertises.
var dimensions = state.Dimensions{Runtime: true, DevicePluginConfig: true}

// Operand renders the gpu-feature-discovery state.
type Operand struct{}

// Enabled reports whether the policy deploys GFD.
func (Operand) Enabled(spec *gpuv1.ClusterPolicySpec) bool { return spec.GFD.IsEnabled() }

// Render returns GFD's ServiceAccount and one DaemonSet per runtime in use.
// GFD ships in the device plugin image, with its own entrypoint.
func (Operand) Render(in state.RenderInput) ([]client.Object, error) {
	spec := &in.Policy.Spec.GFD
	image := render.Image(string(spec.Repository), string(spec.Image), string(spec.Version))
	pod := func(cp *gpuv1.ClusterPolicy, v state.Variant) corev1.PodSpec {
		return podSpec(cp, v, in.DevicePluginConfigFile(v))
	}
	sets, err := in.DaemonSets(DaemonSetName, state.GPUFeatureDiscovery, &spec.ContainerSettings, image, dimensions, pod)
	if err != nil {
		return nil, err
	}
	return append([]client.Object{render.ServiceAccount(in.Policy, ServiceAccountName, in.Namespace, string(state.GPUFeatureDiscovery))}, sets...), nil
}

// podSpec is GFD's pod, reading configuration file configFile ("" for
// none). It is privileged and reads the host's /sys, as
// its upstream manifests run it: it reads the PCI devices' config space
// (vGPU detection, the PCI class behind gpu.mode) and the machine type.
func podSpec(cp *gpuv1.ClusterPolicy, v state.Variant, configFile string) corev1.PodSpec {
	cfgEnv, cfgMounts, cfgVolumes := deviceplugin.ConfigSettings(cp, configFile)
	env := []corev1.EnvVar{
		{Name: "GFD_SLEEP_INTERVAL", Value: "60s"},
		{Name: "GFD_FAIL_ON_INIT_ERROR", Value: "true"},
		// The labels go to nfd-worker as a feature file, which GFD removes
		// when it stops: from v0.19 GFD writes NodeFeature objects by
		// default, which needs an API token and RBAC it does not get, and
		// which nfd-master would drop (denyNodeFeatureLabels).
		{Name: "GFD_USE_NODE_FEATURE_API", Value: "false"},
		{Name: "GFD_OUTPUT_FILE", Value: FeaturesDir + "/gfd"},
		{Name: "MIG_STRATEGY", Value: string(cp.Spec.MIG.StrategyOrDefault())},
		{Name: "NVIDIA_VISIBLE_DEVICES", Value: "all"},
		render.FieldEnv("NODE_NAME", "spec.nodeName"),
		render.FieldEnv("NAMESPACE", "metadata.namespace"),
	}
	return corev1.PodSpec{
		ServiceAccountName:           ServiceAccountName,
		AutomountServiceAccountToken: ptr.To(false),
		RuntimeClassName:             state.RuntimeClassName(&cp.Spec, v.Runtime),
		Containers: []corev1.Container{{
			Name:            ContainerName,
			Command:         []string{"gpu-feature-discovery"},
			Env:             append(env, cfgEnv...),
			SecurityContext: &corev1.SecurityContext{Privileged: ptr.To(true)},
			VolumeMounts: append([]corev1.VolumeMount{
				{Name: "output-dir", MountPath: FeaturesDir},
				{Name: "host-sys", MountPath: "/sys", ReadOnly: true},
			}, cfgMounts...),
		}},
		Volumes: append([]corev1.Volume{
			render.HostPathVolume("output-dir", FeaturesDir, corev1.HostPathDirectoryOrCreate),
			render.HostPathVolume("host-sys", "/sys", corev1.HostPathDirectory),
		}, cfgVolumes...),
	}
}

// Kinds lists the kinds Render returns.
func (Operand) Kinds() []schema.GroupVersionKind {
	return []schema.GroupVersionKind{render.KindServiceAccount, render.KindDaemonSet}
}
