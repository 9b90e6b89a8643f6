package toolkit

import (
	"path"
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
	// PIDFile is the toolkit's lock, written when it starts.
	PIDFile = "/run/nvidia/toolkit/toolkit.pid"
	// HostRoot is where the host's / is mounted, read-only: the toolkit
	// runs the host's containerd there to read its effective config.
	HostRoot = "/host"
	// DriverRootMount is where a driver container's root is mounted.
	DriverRootMount = "/driver-root"
	// CDISpecDir is where CDI specs are written, on the host and in the
	// container: the runtime reads /etc/cdi and /var/run/cdi.
	CDISpecDir = "/var/run/cdi"
)

// CDIHook is the hook the CDI specs name, which the runtime runs on the
// host.
func CDIHook(installDir string) string { return path.Join(installDir, "toolkit", "nvidia-cdi-hook") }

// dimensions: the toolkit configures the node's own runtime and points the
// runtime at the node's driver root.
var dimensions = state.Dimensions{DriverRoot: true, Runtime: true}

// configuredProbe passes once this run of the toolkit has configured the
// runtime: the file it writes (containerd's drop-in, or the config itself
// where the config is version 1 and takes no drop-in; the OCI hook on
// CRI-O) names the NVIDIA runtime and is not older than the pid file the
// toolkit writes when it starts, by a process that still runs (the pod
// shares the host's PID namespace): not the run before a restart. The
// toolkit itself signals nothing else.
// With its NRI plugin it writes no runtime config: it is ready once it
// installed the runtime, after the pid file and before the plugin starts,
// with the runtime's NRI socket there to connect to.
// "Not older", not "newer": busybox's test, the image's sh from toolkit
// v1.20 on, compares whole seconds, and the config is written in the
// pid file's second more often than not; a config of an earlier run is
// older by the 5 s the start waits at least.
const configuredProbe = `running() { p=$(cat "$TOOLKIT_PID_FILE" 2>/dev/null) && [ -n "$p" ] && [ -d "/proc/$p" ]; }
fresh() { grep -qs "$ROOT/toolkit/nvidia-container-runtime" "$1" && running && ! [ "$1" -ot "$TOOLKIT_PID_FILE" ]; }
if [ "$ENABLE_NRI_PLUGIN" = true ]; then
  [ -S "$NRI_SOCKET" ] && running && ! [ "$ROOT/toolkit/nvidia-container-runtime" -ot "$TOOLKIT_PID_FILE" ]
elif [ "$RUNTIME" = crio ] && [ "${CRIO_CONFIG_MODE:-hook}" = hook ]; then
  fresh "$CRIO_HOOKS_DIR/${CRIO_HOOK_FILENAME:-oci-nvidia-hook.json}"
else
  fresh "$RUNTIME_DROP_IN_CONFIG" || fresh "$RUNTIME_CONFIG"
fi`

// start waits 5 s before the toolkit runs: NVIDIA found that containerd
// since 1.6.9 can send a toolkit started right after a containerd restart
// SIGTERM, which crash-loops it (NVIDIA's v26.7.0 entrypoint still waits).
// The policy's args follow as "$@".
const start = `sleep 5 && exec nvidia-toolkit "$@"`

// Operand renders the container-toolkit state.
type Operand struct{}

// Enabled reports whether the policy deploys the toolkit.
func (Operand) Enabled(spec *gpuv1.ClusterPolicySpec) bool { return spec.Toolkit.IsEnabled() }

// Render returns the toolkit's ServiceAccount and one DaemonSet per driver
// root and runtime in use; with the NRI plugin, and while a pod made to
// run it is left, first the admission policy that keeps its device
// annotations to the operator's namespace.
func (Operand) Render(in state.RenderInput) ([]client.Object, error) {
	spec := &in.Policy.Spec.Toolkit
	image := render.Image(string(spec.Repository), string(spec.Image), string(spec.Version))
	// The env that names host paths is translated, not passed on as is.
	component := spec.ContainerSettings
	component.Env = slices.DeleteFunc(slices.Clone(component.Env), func(e gpuv1.EnvVar) bool { return moved(e.Name) })
	sets, err := in.DaemonSetsWith(DaemonSetName, state.ContainerToolkit, &component, image, dimensions, podSpec, markNRIPlugin(in.Policy))
	if err != nil {
		return nil, err
	}
	objs := append([]client.Object{render.ServiceAccount(in.Policy, ServiceAccountName, in.Namespace, string(state.ContainerToolkit))}, sets...)
	if in.Policy.Spec.CDI.UsesNRI() || in.NRIPluginPods {
		// First: the plugin's pods must never run unguarded, and the
		// applier holds them while the guard fails (clusterpolicy
		// applyWanted).
		objs = append(nriGuard(in.Policy, in.Namespace), objs...)
	}
	return objs, nil
}

// podSpec is the toolkit's pod for one driver root and runtime. It rewrites
// the runtime's config on the host and signals the runtime to reload it,
// so it is privileged and shares the host's PID namespace (the runtime's
// PID comes from its socket).
func podSpec(cp *gpuv1.ClusterPolicy, v state.Variant) corev1.PodSpec {
	installDir := cp.Spec.ToolkitInstallDir()
	var env []corev1.EnvVar
	var mounts []corev1.VolumeMount
	var volumes []corev1.Volume
	if cp.Spec.CDI.UsesNRI() {
		env, mounts, volumes = nriSettings(v.Runtime, cp.Spec.Toolkit.Env)
	} else {
		env, mounts, volumes = runtimeSettings(v.Runtime, state.HasRuntimeHandler(&cp.Spec, v.Runtime),
			string(cp.Spec.Operator.RuntimeClass), cp.Spec.Toolkit.Env)
	}
	env = append(env, DriverRootEnv(&cp.Spec, v.DriverRoot)...)
	env = append(env, isolationEnv(cp)...)
	env = append(env, cdiEnv(cp, v.Runtime)...)
	env = append(env,
		corev1.EnvVar{Name: "ROOT", Value: installDir},
		corev1.EnvVar{Name: "HOST_ROOT_MOUNT", Value: HostRoot},
		corev1.EnvVar{Name: "NVIDIA_VISIBLE_DEVICES", Value: "void"},
		corev1.EnvVar{Name: "TOOLKIT_PID_FILE", Value: PIDFile},
	)
	mounts = append(mounts,
		corev1.VolumeMount{Name: "toolkit-run", MountPath: "/run/nvidia/toolkit"},
		corev1.VolumeMount{Name: "toolkit-install-dir", MountPath: installDir},
		corev1.VolumeMount{Name: "cdi-root", MountPath: CDISpecDir},
		render.ReadOnlyHostMount("host-root", HostRoot),
	)
	volumes = append(volumes,
		render.HostPathVolume("toolkit-run", "/run/nvidia/toolkit", corev1.HostPathDirectoryOrCreate),
		render.HostPathVolume("toolkit-install-dir", installDir, corev1.HostPathDirectoryOrCreate),
		render.HostPathVolume("cdi-root", CDISpecDir, corev1.HostPathDirectoryOrCreate),
		render.HostPathVolume("host-root", cp.Spec.HostRoot(), corev1.HostPathDirectory),
	)
	if root := DriverRootInContainer(&cp.Spec, v.DriverRoot); root != HostRoot {
		mounts = append(mounts, render.ReadOnlyHostMount("driver-root", root))
		volumes = append(volumes, render.HostPathVolume("driver-root", DriverRootSource(&cp.Spec, v.DriverRoot), corev1.HostPathDirectoryOrCreate))
	}
	containers := []corev1.Container{{
		Name:            ContainerName,
		Command:         []string{"sh", "-c", start, "nvidia-toolkit"},
		Env:             env,
		SecurityContext: &corev1.SecurityContext{Privileged: ptr.To(true), SELinuxOptions: &corev1.SELinuxOptions{Level: "s0"}},
		ReadinessProbe: &corev1.Probe{
			ProbeHandler:        corev1.ProbeHandler{Exec: &corev1.ExecAction{Command: []string{"sh", "-c", configuredProbe}}},
			InitialDelaySeconds: 5, PeriodSeconds: 10, TimeoutSeconds: 5, FailureThreshold: 1,
		},
		VolumeMounts: mounts,
	}}
	if cp.Spec.CDI.IsEnabled() {
		containers = append(containers, cdiSpecWriter(&cp.Spec, v))
	}
	return corev1.PodSpec{
		HostPID:                      true,
		ServiceAccountName:           ServiceAccountName,
		AutomountServiceAccountToken: ptr.To(false),
		Containers:                   containers,
		Volumes:                      volumes,
	}
}

// DriverRootInContainer is where an operand container sees the node's
// driver root: the driver container's root, or, for a host driver, the
// host's / (where the host's driver is, unless hostPaths.driverInstallDir
// moves it, as on GKE: then that directory, at the driver container's
// place).
func DriverRootInContainer(spec *gpuv1.ClusterPolicySpec, r gpuv1.DriverRoot) string {
	if r == gpuv1.DriverRootHost && spec.DriverRootPath(r) == "/" {
		return HostRoot
	}
	return DriverRootMount
}

// DriverRootSource is the host directory mounted where DriverRootInContainer
// says: the driver root, or the host's root filesystem.
func DriverRootSource(spec *gpuv1.ClusterPolicySpec, r gpuv1.DriverRoot) string {
	if DriverRootInContainer(spec, r) == HostRoot {
		return spec.HostRoot()
	}
	return spec.DriverRootPath(r)
}

// DevRootInContainer and DevRootPath are where the node's driver keeps its
// device nodes, in an operand's container and on the host: the driver
// container's root (its /dev), or the host's / for any host driver, a
// driver in hostPaths.driverInstallDir included (GKE's installer leaves
// no /dev there), as NVIDIA's validator decides (gpu-operator v26.7.0,
// cmd/nvidia-validator/driver.go: getDriverInfo).
func DevRootInContainer(r gpuv1.DriverRoot) string {
	if r == gpuv1.DriverRootHost {
		return HostRoot
	}
	return DriverRootMount
}

// DevRootPath is the host path of DevRootInContainer.
func DevRootPath(spec *gpuv1.ClusterPolicySpec, r gpuv1.DriverRoot) string {
	if r == gpuv1.DriverRootHost {
		return "/"
	}
	return spec.DriverRootPath(r)
}

// DevRootEnv tells an operand that makes CDI specs where the device nodes
// are: on the host, for the spec, and in its container.
func DevRootEnv(spec *gpuv1.ClusterPolicySpec, r gpuv1.DriverRoot) []corev1.EnvVar {
	return []corev1.EnvVar{
		{Name: "NVIDIA_DEV_ROOT", Value: DevRootPath(spec, r)},
		{Name: "DEV_ROOT_CTR_PATH", Value: DevRootInContainer(r)},
	}
}

// DriverRootEnv tells an operand built on the toolkit's libraries (the
// toolkit, the device plugin) where the node's driver is: its path on the
// host, for the specs handed to the runtime, and where the container sees
// it, to load the driver's libraries from.
func DriverRootEnv(spec *gpuv1.ClusterPolicySpec, r gpuv1.DriverRoot) []corev1.EnvVar {
	return []corev1.EnvVar{
		{Name: "NVIDIA_DRIVER_ROOT", Value: spec.DriverRootPath(r)},
		{Name: "DRIVER_ROOT_CTR_PATH", Value: DriverRootInContainer(spec, r)},
	}
}

// Kinds lists the kinds Render returns.
func (Operand) Kinds() []schema.GroupVersionKind {
	return []schema.GroupVersionKind{render.KindServiceAccount, render.KindDaemonSet,
		render.KindValidatingAdmissionPolicy, render.KindValidatingAdmissionPolicyBinding}
}
