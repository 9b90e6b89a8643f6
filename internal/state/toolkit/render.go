package toolkit

import (
	"slices"

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
	DaemonSetName      = "nvidia-container-toolkit-daemonset"
	ServiceAccountName = "nvidia-container-toolkit"
	// ContainerName is the toolkit's container.
	ContainerName = "nvidia-container-toolkit-ctr"
)

// Paths the toolkit uses, on the host and in its container alike.
const (
	// InstallDir is where the toolkit installs the NVIDIA container runtime
	// on the host; the runtime config it writes points there, so it is
	// mounted at the same path.
	InstallDir = "/usr/local/nvidia"
	// RuntimeBinary is the runtime the toolkit registers, as its config
	// names it.
	RuntimeBinary = InstallDir + "/toolkit/nvidia-container-runtime"
	// PIDFile is the toolkit's lock, written when it starts.
	PIDFile = "/run/nvidia/toolkit/toolkit.pid"
	// HostRoot is where the host's / is mounted, read-only: the toolkit
	// runs the host's containerd there to read its effective config.
	HostRoot = "/host"
	// DriverRootMount is where a driver container's root is mounted.
	DriverRootMount = "/driver-root"
)

// dimensions: the toolkit configures the node's own runtime and points the
// runtime at the node's driver root.
var dimensions = state.Dimensions{DriverRoot: true, Runtime: true}

// configuredProbe passes once this run of the toolkit has configured the
// runtime: the file it writes (the runtime's config, or the OCI hook on
// CRI-O) names the NVIDIA runtime and is not older than the pid file the
// toolkit writes when it starts. The toolkit itself signals nothing else.
// "Not older", not "newer": busybox's test, the image's sh from toolkit
// v1.20 on, compares whole seconds, and the config is written in the
// pid file's second more often than not; a config of an earlier run is
// older by the 5 s the start waits at least.
const configuredProbe = `if [ "$RUNTIME" = crio ] && [ "${CRIO_CONFIG_MODE:-hook}" = hook ]; then
  f="$CRIO_HOOKS_DIR/${CRIO_HOOK_FILENAME:-oci-nvidia-hook.json}"
else
  f="$RUNTIME_CONFIG"
fi
grep -qs ` + RuntimeBinary + ` "$f" && [ -e "$TOOLKIT_PID_FILE" ] && ! [ "$f" -ot "$TOOLKIT_PID_FILE" ]`

// start waits 5 s before the toolkit runs: NVIDIA found that containerd
// since 1.6.9 can send a toolkit started right after a containerd restart
// SIGTERM, which crash-loops it. The policy's args follow as "$@".
const start = `sleep 5 && exec nvidia-toolkit "$@"`

// Operand renders the container-toolkit state.
type Operand struct{}

// Enabled reports whether the policy deploys the toolkit.
func (Operand) Enabled(spec *gpuv1.ClusterPolicySpec) bool { return spec.Toolkit.IsEnabled() }

// Render returns the toolkit's ServiceAccount and one DaemonSet per driver
// root and runtime in use.
func (Operand) Render(in state.RenderInput) ([]client.Object, error) {
	spec := &in.Policy.Spec.Toolkit
	image := render.Image(string(spec.Repository), string(spec.Image), string(spec.Version))
	// The env that names host paths is translated, not passed on as is.
	component := spec.ContainerSettings
	component.Env = slices.DeleteFunc(slices.Clone(component.Env), func(e gpuv1.EnvVar) bool { return moved(e.Name) })
	sets, err := in.DaemonSets(DaemonSetName, state.ContainerToolkit, &component, image, dimensions, podSpec)
	if err != nil {
		return nil, err
	}
	return append([]client.Object{render.ServiceAccount(in.Policy, ServiceAccountName, in.Namespace, string(state.ContainerToolkit))}, sets...), nil
}

// podSpec is the toolkit's pod for one driver root and runtime. It rewrites
// the runtime's config on the host and signals the runtime to reload it,
// so it is privileged and shares the host's PID namespace (the runtime's
// PID comes from its socket).
func podSpec(cp *gpuv1.ClusterPolicy, v state.Variant) corev1.PodSpec {
	env, mounts, volumes := runtimeSettings(v.Runtime, string(cp.Spec.Operator.RuntimeClass), cp.Spec.Toolkit.Env)
	env = append(env, DriverRootEnv(v.DriverRoot)...)
	env = append(env, isolationEnv(cp)...)
	env = append(env,
		corev1.EnvVar{Name: "ROOT", Value: InstallDir},
		corev1.EnvVar{Name: "HOST_ROOT_MOUNT", Value: HostRoot},
		corev1.EnvVar{Name: "NVIDIA_VISIBLE_DEVICES", Value: "void"},
		corev1.EnvVar{Name: "TOOLKIT_PID_FILE", Value: PIDFile},
	)
	mounts = append(mounts,
		corev1.VolumeMount{Name: "toolkit-run", MountPath: "/run/nvidia/toolkit"},
		corev1.VolumeMount{Name: "toolkit-install-dir", MountPath: InstallDir},
		corev1.VolumeMount{Name: "cdi-root", MountPath: "/var/run/cdi"},
		render.ReadOnlyHostMount("host-root", HostRoot),
	)
	volumes = append(volumes,
		render.HostPathVolume("toolkit-run", "/run/nvidia/toolkit", corev1.HostPathDirectoryOrCreate),
		render.HostPathVolume("toolkit-install-dir", InstallDir, corev1.HostPathDirectoryOrCreate),
		render.HostPathVolume("cdi-root", "/var/run/cdi", corev1.HostPathDirectoryOrCreate),
		render.HostPathVolume("host-root", "/", corev1.HostPathDirectory),
	)
	if v.DriverRoot == gpuv1.DriverRootContainer {
		mounts = append(mounts, render.ReadOnlyHostMount("driver-root", DriverRootMount))
		volumes = append(volumes, render.HostPathVolume("driver-root", v.DriverRoot.Path(), corev1.HostPathDirectoryOrCreate))
	}
	return corev1.PodSpec{
		HostPID:                      true,
		ServiceAccountName:           ServiceAccountName,
		AutomountServiceAccountToken: ptr.To(false),
		Containers: []corev1.Container{{
			Name:            ContainerName,
			Command:         []string{"sh", "-c", start, "nvidia-toolkit"},
			Env:             env,
			SecurityContext: &corev1.SecurityContext{Privileged: ptr.To(true), SELinuxOptions: &corev1.SELinuxOptions{Level: "s0"}},
			ReadinessProbe: &corev1.Probe{
				ProbeHandler:        corev1.ProbeHandler{Exec: &corev1.ExecAction{Command: []string{"sh", "-c", configuredProbe}}},
				InitialDelaySeconds: 5, PeriodSeconds: 10, TimeoutSeconds: 5, FailureThreshold: 1,
			},
			VolumeMounts: mounts,
		}},
		Volumes: volumes,
	}
}

// DriverRootInContainer is where an operand container sees the node's
// driver root: the driver container's root, or the host's / for a host
// driver.
func DriverRootInContainer(r gpuv1.DriverRoot) string {
	if r == gpuv1.DriverRootHost {
		return HostRoot
	}
	return DriverRootMount
}

// DriverRootEnv tells an operand built on the toolkit's libraries (the
// toolkit, the device plugin) where the node's driver is: its path on the
// host, for the specs handed to the runtime, and where the container sees
// it, to load the driver's libraries from.
func DriverRootEnv(r gpuv1.DriverRoot) []corev1.EnvVar {
	return []corev1.EnvVar{
		{Name: "NVIDIA_DRIVER_ROOT", Value: r.Path()},
		{Name: "DRIVER_ROOT_CTR_PATH", Value: DriverRootInContainer(r)},
	}
}

// Kinds lists the kinds Render returns.
func (Operand) Kinds() []schema.GroupVersionKind {
	return []schema.GroupVersionKind{render.KindServiceAccount, render.KindDaemonSet}
}
