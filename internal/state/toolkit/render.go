package toolkit

import (
	corev1 "k8s.io/api/core/v1"
	nodev1 "k8s.io/api/node/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	gpuv1 "github.com/gpu-operator/gpu-operator/api/v1"
	"github.com/gpu-operator/gpu-operator/internal/render"
	"github.com/gpu-operator/gpu-operator/internal/state"
)

// Names users know from the NVIDIA GPU Operator.
const (
	DaemonSetName      = "nvidia-container-toolkit-daemonset"
	ServiceAccountName = "nvidia-container-toolkit"
)

// RuntimeHandler is the runtime handler the toolkit registers with the
// container runtime, which the RuntimeClass points at.
const RuntimeHandler = "nvidia"

// DriverRoot is where the driver container mounts the driver on the host.
const DriverRoot = "/run/nvidia/driver"

// +kubebuilder:rbac:groups=node.k8s.io,resources=runtimeclasses,verbs=get;list;watch;create;update;patch;delete

// Operand renders the container-toolkit state.
type Operand struct{}

// Enabled reports whether the policy deploys the toolkit.
func (Operand) Enabled(spec *gpuv1.ClusterPolicySpec) bool { return spec.Toolkit.IsEnabled() }

// Render returns the RuntimeClass GPU pods run with, the toolkit's
// ServiceAccount and its DaemonSet.
func (Operand) Render(in state.RenderInput) ([]client.Object, error) {
	spec := &in.Policy.Spec.Toolkit
	ds, err := render.DaemonSet(in.Workload(DaemonSetName, state.ContainerToolkit, &spec.ComponentSpec,
		render.Image(string(spec.Repository), string(spec.Image), string(spec.Version)), podSpec(in.Policy.Spec.Operator)))
	if err != nil {
		return nil, err
	}
	return []client.Object{
		runtimeClass(in),
		render.ServiceAccount(in.Policy, ServiceAccountName, in.Namespace, string(state.ContainerToolkit)),
		ds,
	}, nil
}

// podSpec is the toolkit's pod. It rewrites the runtime's config on the host
// and signals the runtime to reload it, so it is privileged and shares the
// host's PID namespace.
func podSpec(op gpuv1.OperatorSpec) corev1.PodSpec {
	env, mounts, volumes := runtimeSettings(op.DefaultRuntime, string(op.RuntimeClass))
	env = append(env,
		corev1.EnvVar{Name: "NVIDIA_DRIVER_ROOT", Value: DriverRoot},
		corev1.EnvVar{Name: "DRIVER_ROOT_CTR_PATH", Value: "/driver-root"},
		corev1.EnvVar{Name: "ROOT", Value: "/usr/local/nvidia"},
		corev1.EnvVar{Name: "NVIDIA_VISIBLE_DEVICES", Value: "void"},
		corev1.EnvVar{Name: "TOOLKIT_PID_FILE", Value: "/run/nvidia/toolkit/toolkit.pid"},
	)
	mounts = append(mounts,
		corev1.VolumeMount{Name: "run-nvidia", MountPath: "/run/nvidia", MountPropagation: ptr.To(corev1.MountPropagationBidirectional)},
		corev1.VolumeMount{Name: "driver-root", MountPath: "/driver-root", ReadOnly: true, MountPropagation: ptr.To(corev1.MountPropagationHostToContainer)},
		corev1.VolumeMount{Name: "toolkit-install-dir", MountPath: "/usr/local/nvidia"},
		corev1.VolumeMount{Name: "cdi-root", MountPath: "/var/run/cdi"},
	)
	volumes = append(volumes,
		render.HostPathVolume("run-nvidia", "/run/nvidia", corev1.HostPathDirectoryOrCreate),
		render.HostPathVolume("driver-root", DriverRoot, corev1.HostPathDirectoryOrCreate),
		render.HostPathVolume("toolkit-install-dir", "/usr/local/nvidia", corev1.HostPathDirectoryOrCreate),
		render.HostPathVolume("cdi-root", "/var/run/cdi", corev1.HostPathDirectoryOrCreate),
	)
	return corev1.PodSpec{
		HostPID:                      true,
		ServiceAccountName:           ServiceAccountName,
		AutomountServiceAccountToken: ptr.To(false),
		Containers: []corev1.Container{{
			Name:            "nvidia-container-toolkit-ctr",
			Env:             env,
			SecurityContext: &corev1.SecurityContext{Privileged: ptr.To(true), SELinuxOptions: &corev1.SELinuxOptions{Level: "s0"}},
			VolumeMounts:    mounts,
		}},
		Volumes: volumes,
	}
}

// runtimeClass is the RuntimeClass GPU pods name to run with the runtime
// handler the toolkit registers.
func runtimeClass(in state.RenderInput) *nodev1.RuntimeClass {
	return &nodev1.RuntimeClass{
		TypeMeta:   render.TypeMeta("node.k8s.io/v1", "RuntimeClass"),
		ObjectMeta: render.ObjectMeta(in.Policy, string(in.Policy.Spec.Operator.RuntimeClass), "", string(state.ContainerToolkit)),
		Handler:    RuntimeHandler,
	}
}

// Kinds lists the kinds Render returns.
func (Operand) Kinds() []schema.GroupVersionKind {
	return []schema.GroupVersionKind{render.KindRuntimeClass, render.KindServiceAccount, render.KindDaemonSet}
}
