package toolkit

import (
	"slices"

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

// CDISpecWriterName is the toolkit pod's container that writes the
// management spec for the driver that runs.
const CDISpecWriterName = "cdi-spec-writer"

// DriverVersionFile is where the kernel says which nvidia module is
// loaded: the driver that runs, whichever root it came from.
const DriverVersionFile = "/sys/module/nvidia/version"

// cdiEnv turns CDI on in the runtime with the toolkit, as NVIDIA's
// operator does from v25.10 (nvidia-container-toolkit v1.20.0,
// cmd/nvidia-ctk-installer: --enable-cdi-in-runtime, env
// RUNTIME_ENABLE_CDI; the nvidia-container-runtime.mode options written
// to the runtime's config.toml): on containerd the NVIDIA runtime hands a
// management container asking for every GPU the management spec's device,
// and is not made the node's default, since every operand that needs it
// names its RuntimeClass. The installer's own spec (CDI_ENABLED) is left
// off: it writes it once, when it starts, and exits when no driver is
// loaded yet or a control device node cannot be made, while the toolkit
// stays through driver upgrades and may start while a driver is being
// replaced; the spec writer container writes it for every driver that
// runs. CRI-O keeps the OCI hook, which runs in the legacy mode whatever
// the runtime's mode (the installer writes skip-mode-detection): CRI-O
// reads CDI specs itself, and only the spec writer is needed there. A
// device plugin the user set to pass GPU lists another way
// (devicePlugin.env DEVICE_LIST_STRATEGY without cdi-) needs the NVIDIA
// runtime to read them, as the node's default: the runtime is then left
// as without CDI, or GPU pods would start without their GPUs.
func cdiEnv(cp *gpuv1.ClusterPolicy, runtime gpuv1.Runtime) []corev1.EnvVar {
	if !state.HandsOutByCDI(&cp.Spec) || !state.HasRuntimeHandler(&cp.Spec, runtime) {
		return nil
	}
	return []corev1.EnvVar{
		{Name: "RUNTIME_ENABLE_CDI", Value: "true"},
		{Name: "NVIDIA_RUNTIME_SET_AS_DEFAULT", Value: "false"},
		{Name: "NVIDIA_CONTAINER_RUNTIME_MODE", Value: "cdi"},
		{Name: "NVIDIA_CONTAINER_RUNTIME_MODES_CDI_DEFAULT_KIND", Value: ManagementKind},
	}
}

// cdiSpecScript writes the management spec when it starts (a spec left by
// an earlier pod may name other roots) and whenever the driver that runs is
// not the one the spec names: after every driver upgrade, without
// restarting the runtime. The loaded module's version is in the name of
// every driver library the spec mounts. The spec names the control device
// nodes that exist, and nvidia-uvm's is made by nobody else (its module
// creates none, a driver container only loads it): they are made first in
// the dev root, as NVIDIA's toolkit and validator do; beside a driver in
// the host's /, whose nvidia-uvm is often not loaded at boot, the modules
// are loaded first through the host's modprobe (not for an installer's
// driver elsewhere, GKE's, loaded by insmod). The spec is generated from
// the roots as this container sees them and moved to the host's paths in
// one write, as mig-manager does (mig-parted v0.15.0,
// pkg/mig/reconfigure/reconfigure.go: createCDISpec), with the nvidia-ctk
// the toolkit installed on the host; a failed generation leaves the spec
// as it was, and is tried again.
const cdiSpecScript = `ctk="$ROOT/toolkit/nvidia-ctk"
written=
while :; do
  v=$(cat "$DRIVER_VERSION_FILE" 2>/dev/null)
  if [ -n "$v" ] && [ -x "$ctk" ] && { [ -z "$written" ] || ! grep -qs "\.so\.$v\$" "$SPEC"; }; then
    echo "writing $SPEC for driver $v"
    if [ -n "$LOAD_MODULES_ROOT" ]; then
      "$ctk" system create-device-nodes --control-devices --load-kernel-modules --root="$LOAD_MODULES_ROOT" --dev-root="$DEV_ROOT_CTR_PATH" ||
        echo "could not load the host's NVIDIA modules or make their control device nodes"
    else
      "$ctk" system create-device-nodes --control-devices --dev-root="$DEV_ROOT_CTR_PATH" ||
        echo "could not make the NVIDIA control device nodes"
    fi
    "$ctk" cdi generate --mode=management --vendor=management.nvidia.com --class=gpu --format=yaml \
      --driver-root="$DRIVER_ROOT_CTR_PATH" --dev-root="$DEV_ROOT_CTR_PATH" --nvidia-cdi-hook-path="$ROOT/toolkit/nvidia-cdi-hook" |
      "$ctk" cdi transform root --from="$DRIVER_ROOT_CTR_PATH" --to="$NVIDIA_DRIVER_ROOT" --input=- |
      "$ctk" cdi transform root --from="$DEV_ROOT_CTR_PATH" --to="$NVIDIA_DEV_ROOT" --input=- --output="$SPEC" &&
      written=1 || echo "could not write $SPEC"
  fi
  sleep 5
done`

// specNamesDriverProbe passes while the management spec names the driver
// that runs, once that driver's files (its libraries) are in its root; with
// no driver loaded, or one still starting (a module is loaded before its
// driver container mounts its root), there is nothing to name yet: a
// driver upgrade does not make the toolkit unready, and so does not take
// it off the node.
const specNamesDriverProbe = `hasLibraries() {
  for d in usr/lib/x86_64-linux-gnu usr/lib/aarch64-linux-gnu usr/lib64 lib64 usr/lib; do
    [ -e "$DRIVER_ROOT_CTR_PATH/$d/libnvidia-ml.so.$1" ] && return 0
  done
  return 1
}
v=$(cat "$DRIVER_VERSION_FILE" 2>/dev/null) || exit 0
[ -z "$v" ] || ! hasLibraries "$v" || grep -qs "\.so\.$v\$" "$SPEC"`

// cdiSpecWriter is the container that writes the management spec. It runs
// the toolkit's image, for its shell, and the host's nvidia-ctk through
// the install dir; privileged, as it reads the driver's device nodes and,
// beside a host's driver, loads modules and makes device nodes through
// the host's root, which it mounts writable, as the driver root, where it
// makes the control device nodes.
func cdiSpecWriter(spec *gpuv1.ClusterPolicySpec, v state.Variant) corev1.Container {
	installDir := spec.ToolkitInstallDir()
	mounts := []corev1.VolumeMount{
		{Name: "toolkit-install-dir", MountPath: installDir, ReadOnly: true},
		{Name: "cdi-root", MountPath: CDISpecDir},
	}
	if DriverRootInContainer(spec, v.DriverRoot) != HostRoot {
		mounts = append(mounts, corev1.VolumeMount{Name: "driver-root", MountPath: DriverRootMount,
			MountPropagation: ptr.To(corev1.MountPropagationHostToContainer)})
	}
	env := slices.Concat(DriverRootEnv(spec, v.DriverRoot), DevRootEnv(spec, v.DriverRoot), []corev1.EnvVar{
		{Name: "ROOT", Value: installDir},
		{Name: "SPEC", Value: ManagementSpec},
		{Name: "DRIVER_VERSION_FILE", Value: DriverVersionFile},
		{Name: "NVIDIA_VISIBLE_DEVICES", Value: "void"},
	})
	if v.DriverRoot == gpuv1.DriverRootHost {
		mounts = append(mounts, corev1.VolumeMount{Name: "host-root", MountPath: HostRoot,
			MountPropagation: ptr.To(corev1.MountPropagationHostToContainer)})
	}
	if DriverRootInContainer(spec, v.DriverRoot) == HostRoot {
		env = append(env, corev1.EnvVar{Name: "LOAD_MODULES_ROOT", Value: HostRoot})
	}
	return corev1.Container{
		Name:            CDISpecWriterName,
		Image:           render.Image(string(spec.Toolkit.Repository), string(spec.Toolkit.Image), string(spec.Toolkit.Version)),
		ImagePullPolicy: spec.Toolkit.ImagePullPolicy,
		Command:         []string{"sh", "-c", cdiSpecScript},
		Env:             env,
		SecurityContext: &corev1.SecurityContext{Privileged: ptr.To(true), SELinuxOptions: &corev1.SELinuxOptions{Level: "s0"}},
		ReadinessProbe: &corev1.Probe{
			ProbeHandler:  corev1.ProbeHandler{Exec: &corev1.ExecAction{Command: []string{"sh", "-c", specNamesDriverProbe}}},
			PeriodSeconds: 5, TimeoutSeconds: 5, FailureThreshold: 1,
		},
		VolumeMounts: mounts,
	}
}

// WaitForSpecName is the init container that holds an operand back until
// the management spec names the driver that runs.
const WaitForSpecName = "wait-for-cdi-spec"

// waitForSpec waits until the management spec names the loaded driver: an
// operand started after the driver asks the NVIDIA runtime for every GPU,
// which under CDI hands it that spec's files, and after a driver upgrade
// the toolkit, which stays, writes the spec again only once the new
// driver is there (cdiSpecScript). The order is decided on the node,
// where the files are, whatever the operator last read. A node whose
// toolkit is not the operator's (opted out: no nvidia-cdi-hook installed
// there) has no such spec to wait for.
const waitForSpec = `[ -e "$ROOT/toolkit/nvidia-cdi-hook" ] || exit 0
until [ -e "$DRIVER_VERSION_FILE" ] && grep -qs "\.so\.$(cat "$DRIVER_VERSION_FILE")\$" "$SPEC"; do
  sleep 1
done`

// WaitForSpec is the init container that runs waitForSpec in an operand's
// own image (every one has a shell: busybox in the distroless ones), so
// that a new toolkit version restarts nothing else, and the volumes it
// reads; nil with CDI off or without the operator's toolkit, which writes
// the spec.
func WaitForSpec(spec *gpuv1.ClusterPolicySpec, image string, pull corev1.PullPolicy) (*corev1.Container, []corev1.Volume) {
	if !spec.CDI.IsEnabled() || !spec.Toolkit.IsEnabled() {
		return nil, nil
	}
	installDir := spec.ToolkitInstallDir()
	return &corev1.Container{
			Name:            WaitForSpecName,
			Image:           image,
			ImagePullPolicy: pull,
			Command:         []string{"sh", "-c", waitForSpec},
			Env: []corev1.EnvVar{
				{Name: "ROOT", Value: installDir},
				{Name: "SPEC", Value: ManagementSpec},
				{Name: "DRIVER_VERSION_FILE", Value: DriverVersionFile},
				{Name: "NVIDIA_VISIBLE_DEVICES", Value: "void"},
			},
			VolumeMounts: []corev1.VolumeMount{
				{Name: "cdi-root", MountPath: CDISpecDir, ReadOnly: true},
				{Name: "toolkit-install-dir", MountPath: installDir, ReadOnly: true},
			},
		}, []corev1.Volume{
			render.HostPathVolume("cdi-root", CDISpecDir, corev1.HostPathDirectoryOrCreate),
			render.HostPathVolume("toolkit-install-dir", installDir, corev1.HostPathDirectoryOrCreate),
		}
}
