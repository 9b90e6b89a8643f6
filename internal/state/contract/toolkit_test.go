package contract

import (
	"fmt"
	"path"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"

	gpuv1 "github.com/gpu-operator/gpu-operator/api/v1"
	"github.com/gpu-operator/gpu-operator/internal/state"
	"github.com/gpu-operator/gpu-operator/internal/state/toolkit"
)

// Sources of the toolkit's requirements: nvidia-container-toolkit v1.20.0,
// whose image runs cmd/nvidia-ctk-installer (also named nvidia-toolkit).
const (
	tkv              = "NVIDIA/nvidia-container-toolkit@v1.20.0:"
	toolkitMain      = tkv + "cmd/nvidia-ctk-installer/main.go"
	toolkitRuntime   = tkv + "cmd/nvidia-ctk-installer/container/runtime/runtime.go"
	toolkitCtrd      = tkv + "cmd/nvidia-ctk-installer/container/runtime/containerd/containerd.go"
	toolkitDropIn    = tkv + "pkg/config/engine/containerd/config_drop_in.go"
	toolkitSignal    = tkv + "cmd/nvidia-ctk-installer/container/runtime/containerd/containerd_linux.go"
	toolkitContainer = tkv + "cmd/nvidia-ctk-installer/container/container.go"
	toolkitCRIO      = tkv + "cmd/nvidia-ctk-installer/container/runtime/crio/crio.go"
	toolkitInstall   = tkv + "cmd/nvidia-ctk-installer/toolkit/toolkit.go"
	toolkitImage     = tkv + "deployments/container/Dockerfile"
	toolkitCDIGen    = tkv + "cmd/nvidia-ctk/cdi/generate/generate.go"
	toolkitCDIRoot   = tkv + "cmd/nvidia-ctk/cdi/transform/root/root.go"
	toolkitCUDAImage = tkv + "internal/config/image/cuda_image.go"
	toolkitEntry     = "NVIDIA/gpu-operator@v26.7.0:assets/state-container-toolkit/0400_configmap.yaml"
	toolkitCDIOp     = "NVIDIA/gpu-operator@v26.7.0:controllers/object_controls.go (transformToolkitCtrForCDI)"
)

const tk = toolkit.ContainerName

func cdiOn(spec *gpuv1.ClusterPolicySpec) bool  { return spec.CDI.IsEnabled() }
func cdiOff(spec *gpuv1.ClusterPolicySpec) bool { return !spec.CDI.IsEnabled() }

func installDir(p *podCase) string { return p.spec.ToolkitInstallDir() }

func usesNRI(spec *gpuv1.ClusterPolicySpec) bool { return spec.CDI.UsesNRI() }
func noNRI(spec *gpuv1.ClusterPolicySpec) bool   { return !spec.CDI.UsesNRI() }

// byCDI: the device plugin hands out GPUs by CDI name.
func byCDI(spec *gpuv1.ClusterPolicySpec) bool {
	return state.HandsOutByCDI(spec)
}

var toolkitContract = []requirement{
	{source: toolkitMain + " (--runtime, env RUNTIME, defaults to docker)", need: "is told the node's runtime",
		check: envBy(tk, "RUNTIME", func(p *podCase) string { return string(p.variant.Runtime) })},
	{source: toolkitMain + " (--toolkit-install-dir, env TOOLKIT_INSTALL_DIR or ROOT; the toolkit goes to <dir>/toolkit, whose paths the runtime's config names)",
		need: "installs the NVIDIA runtime to a host directory mounted at the same path, toolkit.installDir",
		check: all(envBy(tk, "ROOT", installDir),
			hostMountBy(tk, func(p *podCase) mount { return mount{host: installDir(p), at: installDir(p)} }))},
	{source: toolkitMain + " (--pid-file, env TOOLKIT_PID_FILE, taken when it starts; the file must be named toolkit.pid)",
		need:  "writes its pid file on the host, where the probe reads it",
		check: all(env(tk, "TOOLKIT_PID_FILE", toolkit.PIDFile), hostMount(tk, mount{host: "/run/nvidia/toolkit", at: "/run/nvidia/toolkit"}))},
	{source: toolkitRuntime + " (--nvidia-runtime-name, env NVIDIA_RUNTIME_NAME, then CONTAINERD_RUNTIME_CLASS)", need: "registers the handler the RuntimeClass names",
		check: envBy(tk, "NVIDIA_RUNTIME_NAME", func(p *podCase) string { return string(p.spec.Operator.RuntimeClass) }), where: noNRI},
	{source: toolkitMain + " (--enable-nri-plugin, --nri-socket default /var/run/nri/nri.sock, --nri-namespace: the namespace that may receive management devices); " +
		tkv + "cmd/nvidia-ctk-installer/container/runtime/runtime.go (no runtime config with the NRI plugin); " +
		"NVIDIA/gpu-operator@v26.7.0:controllers/object_controls.go (transformNRISocketMounts)",
		need: "with the NRI plugin, connects to the runtime's NRI socket and gives management devices to the operator's namespace, configuring no runtime",
		check: all(env(tk, "ENABLE_NRI_PLUGIN", "true"), env(tk, "NRI_SOCKET", "/runtime/nri-sock-dir/nri.sock"),
			hostMount(tk, mount{host: "/var/run/nri", at: "/runtime/nri-sock-dir"}), fieldEnv(tk, "NRI_NAMESPACE", "metadata.namespace"),
			noEnv(tk, "RUNTIME_CONFIG"), noEnv(tk, "RUNTIME_DROP_IN_CONFIG"), noEnv(tk, "NVIDIA_CONTAINER_RUNTIME_MODE")),
		where: usesNRI},
	{source: toolkitRuntime + " (--host-root, env HOST_ROOT_MOUNT, default /host); " + tkv + "pkg/config/engine/containerd/containerd.go (chroot <host-root> containerd config dump)",
		need: "reads the runtime's effective config (imports and defaults included) by running the host's runtime, from the host's root filesystem read-only",
		check: all(env(tk, "HOST_ROOT_MOUNT", toolkit.HostRoot),
			hostMountBy(tk, func(p *podCase) mount {
				return mount{host: p.spec.HostRoot(), at: toolkit.HostRoot, readOnly: true, propagation: corev1.MountPropagationHostToContainer}
			}))},
	{source: toolkitCtrd + " (config default /etc/containerd/config.toml: read, and written only to import the drop-in)",
		need:  "reads containerd's config through a host mount of its directory",
		check: runtimeFile("RUNTIME_CONFIG", "/etc/containerd", "/runtime/config-dir/config.toml"),
		only:  onRuntime(gpuv1.RuntimeContainerd), where: noNRI},
	{source: toolkitCtrd + " (drop-in default /etc/containerd/conf.d/99-nvidia.toml, a path in the container); " + toolkitDropIn +
		" (the config imports the drop-in's host path, RUNTIME_DROP_IN_CONFIG_HOST_PATH; without a drop-in a version 2 or 3 config loses its runtimes)",
		need: "writes its runtimes to containerd's drop-in directory on the host, and has the config import it by its host path",
		check: all(runtimeFile("RUNTIME_DROP_IN_CONFIG", "/etc/containerd/conf.d", "/runtime/config-dir.d/99-nvidia.toml"),
			env(tk, "RUNTIME_DROP_IN_CONFIG_HOST_PATH", "/etc/containerd/conf.d/99-nvidia.toml")),
		only: onRuntime(gpuv1.RuntimeContainerd), where: noNRI},
	{source: toolkitSignal + " (SIGHUP to the PID read from the socket's peer credentials; restart mode signal by default, " + toolkitContainer + ")",
		need:  "signals the host's containerd through its socket, by host PID",
		check: all(runtimeFile("RUNTIME_SOCKET", "/run/containerd", "/runtime/sock-dir/containerd.sock"), hostPID(true)),
		only:  onRuntime(gpuv1.RuntimeContainerd), where: noNRI},
	{source: toolkitCRIO + " (--config-mode now defaults to config, which restarts CRI-O through systemd; hook writes the OCI hook into --hooks-dir, read without a restart)",
		need: "writes its OCI hook into the host's hooks directory, which CRI-O reads without a restart",
		check: all(env(tk, "CRIO_CONFIG_MODE", "hook"), env(tk, "CRIO_HOOKS_DIR", "/runtime/hooks-dir"),
			hostMount(tk, mount{host: "/usr/share/containers/oci/hooks.d", at: "/runtime/hooks-dir"})),
		only: onRuntime(gpuv1.RuntimeCRIO), where: func(spec *gpuv1.ClusterPolicySpec) bool { return !byCDI(spec) && noNRI(spec) }},
	{source: toolkitCRIO + " (config mode: the nvidia, nvidia-cdi and nvidia-legacy runtimes into the drop-in RUNTIME_DROP_IN_CONFIG, " +
		"then systemctl restart crio chrooted into HOST_ROOT_MOUNT, restart mode systemd); " + toolkitContainer + " (the restart); " +
		toolkitCDIOp + " (CRIO_CONFIG_MODE=config with CDI); NVIDIA/gpu-operator@v26.7.0:controllers/object_controls.go:80, 1424-1475 " +
		"(the drop-in /etc/crio/crio.conf.d/99-nvidia.conf)",
		need: "with CDI on CRI-O, registers the NVIDIA runtimes in a drop-in on the host, where NVIDIA's operator puts it, and restarts CRI-O " +
			"through the host's systemd, so that pods naming the RuntimeClasses start",
		check: all(env(tk, "CRIO_CONFIG_MODE", "config"), env(tk, "RUNTIME_RESTART_MODE", "systemd"), noEnv(tk, "CRIO_HOOKS_DIR"),
			runtimeFile("RUNTIME_DROP_IN_CONFIG", "/etc/crio/crio.conf.d", "/runtime/config-dir.d/99-nvidia.conf"),
			env(tk, "RUNTIME_DROP_IN_CONFIG_HOST_PATH", "/etc/crio/crio.conf.d/99-nvidia.conf"),
			runtimeFile("RUNTIME_CONFIG", "/etc/crio", "/runtime/config-dir/crio.conf"),
			env(tk, "HOST_ROOT_MOUNT", "/host"),
			hostMountBy(tk, func(p *podCase) mount {
				return mount{host: p.spec.HostRoot(), at: "/host", readOnly: true, propagation: corev1.MountPropagationHostToContainer}
			})),
		only: onRuntime(gpuv1.RuntimeCRIO), where: func(spec *gpuv1.ClusterPolicySpec) bool { return byCDI(spec) && noNRI(spec) }},
	{source: toolkitInstall + " (--driver-root, env NVIDIA_DRIVER_ROOT: a host path, into the runtime's config and the CDI spec; --driver-root-ctr-path, env DRIVER_ROOT_CTR_PATH: the same tree in the container)",
		need: "points the runtime at the node's driver root, and sees it",
		check: all(envBy(tk, "NVIDIA_DRIVER_ROOT", func(p *podCase) string { return p.spec.DriverRootPath(p.variant.DriverRoot) }),
			envBy(tk, "DRIVER_ROOT_CTR_PATH", func(p *podCase) string { return toolkit.DriverRootInContainer(p.spec, p.variant.DriverRoot) }),
			hostMountBy(tk, func(p *podCase) mount {
				return mount{host: toolkit.DriverRootSource(p.spec, p.variant.DriverRoot), at: toolkit.DriverRootInContainer(p.spec, p.variant.DriverRoot),
					readOnly: true, propagation: corev1.MountPropagationHostToContainer}
			}))},
	{source: toolkitMain + " (pid file before install; the drop-in, then the config, written by setup, then the runtime signalled); " +
		toolkitImage + " (busybox sh: -nt and -ot compare whole seconds)",
		need:  "is ready once this run wrote the drop-in (or a version 1 config, or the hook) naming the NVIDIA runtime, in the pid file's second or later",
		check: probe(tk, "readiness", execProbeHas(`fresh "$RUNTIME_DROP_IN_CONFIG" || fresh "$RUNTIME_CONFIG"`))},
	{source: toolkitEntry + " (sleep 5 before nvidia-toolkit: containerd since 1.6.9 SIGTERMs a toolkit started right after its restart); " +
		toolkitImage + " (nvidia-toolkit links to nvidia-ctk-installer)",
		need:  "waits 5 s before it starts",
		check: commandPrefix(tk, `sh -c sleep 5 && exec nvidia-toolkit "$@" nvidia-toolkit`)},
	{source: toolkitMain + " (writes host files, signals or restarts the runtime)", need: "privileged",
		check: privileged(tk, true)},
	{source: toolkitRuntime + " (--enable-cdi-in-runtime, env RUNTIME_ENABLE_CDI); " + toolkitInstall +
		" (NVIDIA_CONTAINER_RUNTIME_MODE and ..._MODES_CDI_DEFAULT_KIND into the runtime's config.toml); " + toolkitCDIOp,
		need: "with CDI, turns CDI on in containerd (CRI-O reads CDI specs itself), and the NVIDIA runtime hands a management container " +
			"asking for every GPU the management spec's device, and is not the node's default runtime",
		check: all(env(tk, "RUNTIME_ENABLE_CDI", "true"), env(tk, "NVIDIA_CONTAINER_RUNTIME_MODE", "cdi"),
			env(tk, "NVIDIA_CONTAINER_RUNTIME_MODES_CDI_DEFAULT_KIND", toolkit.ManagementKind), env(tk, "NVIDIA_RUNTIME_SET_AS_DEFAULT", "false")),
		where: func(spec *gpuv1.ClusterPolicySpec) bool { return byCDI(spec) && noNRI(spec) }},
	{source: toolkitInstall + " (CDI_ENABLED: the spec and the control device nodes once, when the installer starts, and it exits when either fails: " +
		"no driver loaded, a read-only dev root)",
		need:  "never makes its start depend on the driver: the spec is written by its own container, for every driver that runs",
		check: all(noEnv(tk, "CDI_ENABLED"), noEnv(tk, "CREATE_DEVICE_NODES"))},
	{source: toolkitCDIGen + " (--mode=management, --driver-root, --dev-root, --nvidia-cdi-hook-path, --vendor, --class; stdout without --output); " +
		toolkitCDIRoot + " (--from, --to, --input=-, --output); NVIDIA/mig-parted@v0.15.0:pkg/mig/reconfigure/reconfigure.go (createCDISpec: the same pipeline)",
		need: "with CDI, writes the management spec for the driver that runs, from the roots it sees to the host's, naming the installed hook, and is ready only once it names that driver",
		check: all(scriptHas(toolkit.CDISpecWriterName, `"$ctk" cdi generate --mode=management --vendor=management.nvidia.com --class=gpu --format=yaml \`),
			scriptHas(toolkit.CDISpecWriterName, `--driver-root="$DRIVER_ROOT_CTR_PATH" --dev-root="$DEV_ROOT_CTR_PATH" --nvidia-cdi-hook-path="$ROOT/toolkit/nvidia-cdi-hook" |`),
			scriptHas(toolkit.CDISpecWriterName, `"$ctk" cdi transform root --from="$DRIVER_ROOT_CTR_PATH" --to="$NVIDIA_DRIVER_ROOT" --input=- |`),
			scriptHas(toolkit.CDISpecWriterName, `"$ctk" cdi transform root --from="$DEV_ROOT_CTR_PATH" --to="$NVIDIA_DEV_ROOT" --input=- --output="$SPEC" &&`),
			envBy(toolkit.CDISpecWriterName, "ROOT", installDir),
			env(toolkit.CDISpecWriterName, "SPEC", toolkit.ManagementSpec),
			envBy(toolkit.CDISpecWriterName, "NVIDIA_DRIVER_ROOT", func(p *podCase) string { return p.spec.DriverRootPath(p.variant.DriverRoot) }),
			envBy(toolkit.CDISpecWriterName, "DRIVER_ROOT_CTR_PATH", func(p *podCase) string { return toolkit.DriverRootInContainer(p.spec, p.variant.DriverRoot) }),
			envBy(toolkit.CDISpecWriterName, "NVIDIA_DEV_ROOT", func(p *podCase) string { return toolkit.DevRootPath(p.spec, p.variant.DriverRoot) }),
			envBy(toolkit.CDISpecWriterName, "DEV_ROOT_CTR_PATH", func(p *podCase) string { return toolkit.DevRootInContainer(p.variant.DriverRoot) }),
			hostMountBy(toolkit.CDISpecWriterName, func(p *podCase) mount {
				return mount{host: installDir(p), at: installDir(p), readOnly: true}
			}),
			hostMount(toolkit.CDISpecWriterName, mount{host: toolkit.CDISpecDir, at: toolkit.CDISpecDir}),
			probe(toolkit.CDISpecWriterName, "readiness", execProbeHas(`[ -z "$v" ] || ! hasLibraries "$v" || grep -qs "\.so\.$v\$" "$SPEC"`))),
		where: cdiOn},
	{source: devNodesCmd + "; NVIDIA/gpu-operator@v26.7.0:cmd/nvidia-validator/main.go (createDevCharSymlinks: control nodes made, modules loaded beside a host's driver but not an installer's); " +
		"gpu-driver-container@d10b41a:ubuntu22.04/nvidia-driver (_load_driver: modprobe nvidia-uvm, no node made)",
		need: "with CDI, makes the control device nodes the spec names in the dev root first (nvidia-uvm's is made by nobody else); beside a driver in the host's /, loads its modules through the host's modprobe before",
		check: func(p *podCase) error {
			w := toolkit.CDISpecWriterName
			common := all(scriptHas(w, `"$ctk" system create-device-nodes --control-devices --dev-root="$DEV_ROOT_CTR_PATH" ||`),
				scriptHas(w, `"$ctk" system create-device-nodes --control-devices --load-kernel-modules --root="$LOAD_MODULES_ROOT" --dev-root="$DEV_ROOT_CTR_PATH" ||`))
			if toolkit.DriverRootInContainer(p.spec, p.variant.DriverRoot) != toolkit.HostRoot {
				// Its dev root is the driver root, writable here.
				return all(common, noEnv(w, "LOAD_MODULES_ROOT"), func(p *podCase) error {
					if p.variant.DriverRoot == gpuv1.DriverRootHost {
						return nil // GKE's: the dev root is the host's /
					}
					return hostMountBy(w, func(p *podCase) mount {
						return mount{host: p.spec.DriverRootPath(p.variant.DriverRoot), at: "/driver-root", propagation: corev1.MountPropagationHostToContainer}
					})(p)
				})(p)
			}
			return all(common, env(w, "LOAD_MODULES_ROOT", "/host"),
				hostMountBy(w, func(p *podCase) mount {
					return mount{host: p.spec.HostRoot(), at: "/host", propagation: corev1.MountPropagationHostToContainer}
				}))(p)
		},
		where: cdiOn},
	{source: toolkitInstall + " (the runtime's config names the management kind only with CDI)", need: "without CDI, writes no CDI spec and leaves the runtime's mode alone",
		check: all(noEnv(tk, "RUNTIME_ENABLE_CDI"), noEnv(tk, "NVIDIA_CONTAINER_RUNTIME_MODE"), noContainer(toolkit.CDISpecWriterName)), where: cdiOff},
	{source: tkv + "internal/config/image/cuda_image.go (VisibleDevices: the device list mounts and variable, read by the NVIDIA runtime only); " + pluginMain,
		need:  "with CDI on and a device plugin the user set to pass GPU lists another way, leaves the NVIDIA runtime the node's default, reading them",
		check: all(noEnv(tk, "NVIDIA_CONTAINER_RUNTIME_MODE"), noEnv(tk, "NVIDIA_RUNTIME_SET_AS_DEFAULT")),
		where: func(spec *gpuv1.ClusterPolicySpec) bool { return spec.CDI.IsEnabled() && !byCDI(spec) }},
	{source: toolkitCUDAImage + " (VisibleDevices: CDI annotations, then the device list mounts, and NVIDIA_VISIBLE_DEVICES only when privileged or accepted)",
		need:  "keeps a pod from naming GPUs it did not request in either mode, unless the user set the device plugin to pass the variable",
		check: env(tk, "ACCEPT_NVIDIA_VISIBLE_DEVICES_ENVVAR_WHEN_UNPRIVILEGED", "false"),
		where: func(spec *gpuv1.ClusterPolicySpec) bool {
			return !strings.Contains(state.DeviceListStrategy(spec), "envvar")
		}},
}

func TestToolkitContract(t *testing.T) { checkAll(t, state.ContainerToolkit, toolkitContract) }

// runtimeFile checks an env variable names a runtime file through a host
// mount of its directory.
func runtimeFile(name, hostDir, inside string) func(*podCase) error {
	return all(env(tk, name, inside), hostMount(tk, mount{host: hostDir, at: path.Dir(inside)}))
}

// noContainer checks a pod has no container of a name.
func noContainer(name string) func(*podCase) error {
	return func(p *podCase) error {
		if _, err := container(p, name); err == nil {
			return fmt.Errorf("the pod has a %s container", name)
		}
		return nil
	}
}
