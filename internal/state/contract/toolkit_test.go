package contract

import (
	"path"
	"testing"

	corev1 "k8s.io/api/core/v1"

	gpuv1 "github.com/gpu-operator/gpu-operator/api/v1"
	"github.com/gpu-operator/gpu-operator/internal/state"
	"github.com/gpu-operator/gpu-operator/internal/state/toolkit"
)

// Sources of the toolkit's requirements: nvidia-container-toolkit v1.17.8,
// whose image runs tools/container/nvidia-toolkit.
const (
	toolkitRun        = "NVIDIA/nvidia-container-toolkit@v1.17.8:tools/container/nvidia-toolkit/run.go"
	toolkitRuntime    = "NVIDIA/nvidia-container-toolkit@v1.17.8:tools/container/runtime/runtime.go"
	toolkitContainerd = "NVIDIA/nvidia-container-toolkit@v1.17.8:tools/container/runtime/containerd/containerd.go"
	toolkitSignal     = "NVIDIA/nvidia-container-toolkit@v1.17.8:tools/container/runtime/containerd/containerd_linux.go"
	toolkitCRIO       = "NVIDIA/nvidia-container-toolkit@v1.17.8:tools/container/runtime/crio/crio.go"
	toolkitInstall    = "NVIDIA/nvidia-container-toolkit@v1.17.8:tools/container/toolkit/toolkit.go"
	toolkitEntrypoint = "NVIDIA/gpu-operator@v25.3.4:assets/state-container-toolkit/0400_configmap.yaml"
	// From v1.18 on the image's sh is busybox (v1.20.0 installs Debian's
	// busybox-static, with every applet, into /busybox), whose test
	// compares modification times in whole seconds (coreutils/test.c).
	toolkitShell = "NVIDIA/nvidia-container-toolkit@v1.20.0:deployments/container/Dockerfile"
)

const tk = toolkit.ContainerName

var toolkitContract = []requirement{
	{source: toolkitRun + " (--runtime defaults to docker)", need: "is told the node's runtime",
		check: envBy(tk, "RUNTIME", func(p *podCase) string { return string(p.variant.Runtime) })},
	{source: toolkitRun + " (--root has no default); " + toolkitInstall + " (runtime configs name ROOT/toolkit/...)",
		need: "installs the NVIDIA runtime to a host directory mounted at the same path, which the runtime's config names",
		check: all(env(tk, "ROOT", toolkit.InstallDir),
			hostMount(tk, mount{host: toolkit.InstallDir, at: toolkit.InstallDir}))},
	{source: toolkitRun + " (--pid-file, taken when it starts)", need: "writes its pid file on the host, where the probe reads it",
		check: all(env(tk, "TOOLKIT_PID_FILE", toolkit.PIDFile), hostMount(tk, mount{host: "/run/nvidia/toolkit", at: "/run/nvidia/toolkit"}))},
	{source: toolkitRuntime + " (--runtime-name, env NVIDIA_RUNTIME_NAME)", need: "registers the handler the RuntimeClass names",
		check: envBy(tk, "NVIDIA_RUNTIME_NAME", func(p *podCase) string { return string(p.spec.Operator.RuntimeClass) })},
	{source: toolkitRuntime + " (--host-root, default /host); NVIDIA/nvidia-container-toolkit@v1.17.8:pkg/config/engine/containerd/containerd.go (chroot <host-root> containerd config dump)",
		need: "reads the runtime's effective config (imports and defaults included) by running the host's runtime, from the host's / read-only",
		check: all(env(tk, "HOST_ROOT_MOUNT", toolkit.HostRoot),
			hostMount(tk, mount{host: "/", at: toolkit.HostRoot, readOnly: true, propagation: corev1.MountPropagationHostToContainer}))},
	{source: toolkitContainerd + " (defaults /etc/containerd/config.toml, /run/containerd/containerd.sock)",
		need:  "writes containerd's config file through a host mount of its directory",
		check: runtimeFile("RUNTIME_CONFIG", "/etc/containerd", "/runtime/config-dir/config.toml"),
		only:  onRuntime(gpuv1.RuntimeContainerd)},
	{source: toolkitSignal + " (SIGHUP to the PID read from the socket's peer credentials)",
		need:  "signals the host's containerd through its socket, by host PID",
		check: all(runtimeFile("RUNTIME_SOCKET", "/run/containerd", "/runtime/sock-dir/containerd.sock"), hostPID(true)),
		only:  onRuntime(gpuv1.RuntimeContainerd)},
	{source: toolkitCRIO + " (--config-mode defaults to hook; --hooks-dir /usr/share/containers/oci/hooks.d, written as given)",
		need: "writes its OCI hook into the host's hooks directory, which CRI-O reads without a restart",
		check: all(env(tk, "CRIO_CONFIG_MODE", "hook"), env(tk, "CRIO_HOOKS_DIR", "/runtime/hooks-dir"),
			hostMount(tk, mount{host: "/usr/share/containers/oci/hooks.d", at: "/runtime/hooks-dir"})),
		only: onRuntime(gpuv1.RuntimeCRIO)},
	{source: toolkitInstall + " (--driver-root: a host path, into the runtime's config; --driver-root-ctr-path: the same tree in the container)",
		need: "points the runtime at the node's driver root, and sees it",
		check: all(envBy(tk, "NVIDIA_DRIVER_ROOT", func(p *podCase) string { return p.variant.DriverRoot.Path() }),
			envBy(tk, "DRIVER_ROOT_CTR_PATH", func(p *podCase) string { return toolkit.DriverRootInContainer(p.variant.DriverRoot) }),
			hostMountBy(tk, func(p *podCase) mount {
				return mount{host: p.variant.DriverRoot.Path(), at: toolkit.DriverRootInContainer(p.variant.DriverRoot),
					readOnly: true, propagation: corev1.MountPropagationHostToContainer}
			}))},
	{source: toolkitRun + " (pid file before install; the runtime's config written by setup, then the runtime signalled); " +
		toolkitShell + " (busybox sh: -nt and -ot compare whole seconds)",
		need:  "is ready once this run wrote the runtime's config (or hook) naming the NVIDIA runtime, in the pid file's second or later",
		check: probe(tk, "readiness", execProbeHas(`grep -qs `+toolkit.RuntimeBinary+` "$f" && [ -e "$TOOLKIT_PID_FILE" ] && ! [ "$f" -ot "$TOOLKIT_PID_FILE" ]`))},
	{source: toolkitEntrypoint + " (sleep 5 before nvidia-toolkit: containerd since 1.6.9 SIGTERMs a toolkit started right after its restart)",
		need:  "waits 5 s before it starts",
		check: commandPrefix(tk, `sh -c sleep 5 && exec nvidia-toolkit "$@" nvidia-toolkit`)},
	{source: toolkitRun + " (writes host files, signals or restarts the runtime)", need: "privileged",
		check: privileged(tk, true)},
}

func TestToolkitContract(t *testing.T) { checkAll(t, state.ContainerToolkit, toolkitContract) }

// runtimeFile checks an env variable names a runtime file through a host
// mount of its directory.
func runtimeFile(name, hostDir, inside string) func(*podCase) error {
	return all(env(tk, name, inside), hostMount(tk, mount{host: hostDir, at: path.Dir(inside)}))
}
