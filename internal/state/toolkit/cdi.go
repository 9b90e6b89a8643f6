package toolkit

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"

	gpuv1 "github.com/gpu-operator/gpu-operator/api/v1"
	"github.com/gpu-operator/gpu-operator/internal/render"
	"github.com/gpu-operator/gpu-operator/internal/state"
)

// ManagementKind is the CDI kind of the spec the toolkit writes for
// management containers (the operands), whose one device, all, is every
// GPU with the driver's files; ManagementSpec is its file.
const (
	ManagementKind = "management.nvidia.com/gpu"
	ManagementSpec = CDISpecDir + "/management.nvidia.com-gpu.yaml"
)

// CDIRefreshName is the toolkit pod's container that keeps the management
// spec naming the driver that runs.
const CDIRefreshName = "cdi-spec-refresh"

// cdiEnv turns CDI on in the toolkit, as NVIDIA's operator does from v25.10
// (nvidia-container-toolkit v1.20.0,
// cmd/nvidia-ctk-installer/toolkit/toolkit.go): it writes the management
// spec when it starts and enables CDI in the runtime. On containerd the
// NVIDIA runtime then hands a management container asking for every GPU
// the management spec's device instead of reading the visible-devices
// list itself, and is not made the node's default, since every operand
// that needs it names its RuntimeClass. CRI-O keeps the OCI hook, which
// works in the legacy mode alone (cmd/nvidia-container-runtime-hook:
// assertModeIsLegacy fails every GPU container otherwise): its runtime
// mode stays the toolkit's default, which resolves to legacy for the
// operands; CRI-O itself injects the device plugin's CDI devices.
func cdiEnv(spec *gpuv1.ClusterPolicySpec, runtime gpuv1.Runtime) []corev1.EnvVar {
	if !spec.CDI.IsEnabled() {
		return nil
	}
	env := []corev1.EnvVar{{Name: "CDI_ENABLED", Value: "true"}}
	if !state.HasRuntimeHandler(runtime) {
		return env
	}
	return append(env,
		corev1.EnvVar{Name: "NVIDIA_RUNTIME_SET_AS_DEFAULT", Value: "false"},
		corev1.EnvVar{Name: "NVIDIA_CONTAINER_RUNTIME_MODE", Value: "cdi"},
		corev1.EnvVar{Name: "NVIDIA_CONTAINER_RUNTIME_MODES_CDI_DEFAULT_KIND", Value: ManagementKind},
	)
}

// cdiRefreshScript writes the management spec again whenever the driver
// that runs is not the one it names. The toolkit writes it only when it
// starts, and a driver upgrade replaces the driver under a toolkit that
// stays (the state graph keeps it, so that the runtime is not restarted
// twice): without this, the operands that start after the new driver
// would be handed the old driver's files. The loaded module's version
// (DriverVersionFile) is in the name of every driver library
// the spec mounts. The spec is generated from the driver root as this
// container sees it and moved to the host's paths in one write, as the
// toolkit does (nvidia-ctk cdi generate --mode=management; cdi transform
// root), with the nvidia-ctk the toolkit installed on the host.
const cdiRefreshScript = `ctk="$ROOT/toolkit/nvidia-ctk"
while :; do
  v=$(cat "$DRIVER_VERSION_FILE" 2>/dev/null)
  if [ -n "$v" ] && [ -x "$ctk" ] && ! grep -qs "\.so\.$v\$" "$SPEC"; then
    echo "writing $SPEC for driver $v"
    "$ctk" cdi generate --mode=management --vendor=management.nvidia.com --class=gpu --format=yaml \
      --driver-root="$DRIVER_ROOT_CTR_PATH" --dev-root="$DRIVER_ROOT_CTR_PATH" --nvidia-cdi-hook-path="$ROOT/toolkit/nvidia-cdi-hook" |
      "$ctk" cdi transform root --from="$DRIVER_ROOT_CTR_PATH" --to="$NVIDIA_DRIVER_ROOT" --input=- --output="$SPEC" ||
      echo "could not write $SPEC"
  fi
  sleep 5
done`

// specNamesDriverProbe passes while the management spec names the driver
// that runs, or no driver runs: the operands that start after the driver
// find the new driver's files.
const specNamesDriverProbe = `! [ -e "$DRIVER_VERSION_FILE" ] || grep -qs "\.so\.$(cat "$DRIVER_VERSION_FILE")\$" "$SPEC"`

// DriverVersionFile is where the kernel says which nvidia module is
// loaded: the driver that runs, whichever root it came from.
const DriverVersionFile = "/sys/module/nvidia/version"

// cdiRefresh is the container that keeps the management spec current. It
// runs the toolkit's image, for its shell, and the host's nvidia-ctk
// through the install dir; privileged, as generating the spec reads the
// driver's device nodes.
func cdiRefresh(spec *gpuv1.ClusterPolicySpec, v state.Variant) corev1.Container {
	installDir := spec.ToolkitInstallDir()
	root := DriverRootInContainer(spec, v.DriverRoot)
	mounts := []corev1.VolumeMount{
		{Name: "toolkit-install-dir", MountPath: installDir, ReadOnly: true},
		{Name: "cdi-root", MountPath: CDISpecDir},
	}
	if root == HostRoot {
		mounts = append(mounts, render.ReadOnlyHostMount("host-root", HostRoot))
	} else {
		mounts = append(mounts, render.ReadOnlyHostMount("driver-root", root))
	}
	env := append(DriverRootEnv(spec, v.DriverRoot),
		corev1.EnvVar{Name: "ROOT", Value: installDir},
		corev1.EnvVar{Name: "SPEC", Value: ManagementSpec},
		corev1.EnvVar{Name: "DRIVER_VERSION_FILE", Value: DriverVersionFile},
		corev1.EnvVar{Name: "NVIDIA_VISIBLE_DEVICES", Value: "void"},
	)
	return corev1.Container{
		Name:            CDIRefreshName,
		Image:           render.Image(string(spec.Toolkit.Repository), string(spec.Toolkit.Image), string(spec.Toolkit.Version)),
		ImagePullPolicy: spec.Toolkit.ImagePullPolicy,
		Command:         []string{"sh", "-c", cdiRefreshScript},
		Env:             env,
		SecurityContext: &corev1.SecurityContext{Privileged: ptr.To(true), SELinuxOptions: &corev1.SELinuxOptions{Level: "s0"}},
		ReadinessProbe: &corev1.Probe{
			ProbeHandler:  corev1.ProbeHandler{Exec: &corev1.ExecAction{Command: []string{"sh", "-c", specNamesDriverProbe}}},
			PeriodSeconds: 5, TimeoutSeconds: 5, FailureThreshold: 1,
		},
		VolumeMounts: mounts,
	}
}
