package contract

import (
	"cmp"
	"fmt"
	"path"
	"testing"

	corev1 "k8s.io/api/core/v1"

	gpuv1 "github.com/gpu-operator/gpu-operator/api/v1"
	"github.com/gpu-operator/gpu-operator/internal/pluginconfig"
	"github.com/gpu-operator/gpu-operator/internal/state"
	"github.com/gpu-operator/gpu-operator/internal/state/deviceplugin"
	"github.com/gpu-operator/gpu-operator/internal/state/gfd"
	"github.com/gpu-operator/gpu-operator/internal/state/toolkit"
)

// Sources of the device plugin's and GFD's requirements:
// k8s-device-plugin v0.20.0, which ships both.
const (
	dpv              = "NVIDIA/k8s-device-plugin@v0.20.0:"
	pluginMain       = dpv + "cmd/nvidia-device-plugin/main.go"
	pluginRoot       = dpv + "cmd/nvidia-device-plugin/root.go"
	pluginServer     = dpv + "internal/plugin/server.go"
	pluginCDI        = dpv + "internal/cdi/cdi.go"
	pluginManager    = dpv + "cmd/nvidia-device-plugin/plugin-manager.go"
	gfdMain          = dpv + "cmd/gpu-feature-discovery/main.go"
	gfdOutput        = dpv + "internal/lm/output.go"
	gfdManifest      = dpv + "deployments/static/gpu-feature-discovery-daemonset.yaml"
	pluginFlags      = dpv + "api/config/v1/flags.go"
	pluginConfigLoad = dpv + "api/config/v1/config.go (NewConfig, parseConfig)"
	operatorPlugin   = "NVIDIA/gpu-operator@v26.7.0:controllers/object_controls.go (setRuntimeClassName: none on CRI-O without CDI; " +
		"here CRI-O keeps the OCI hook with CDI too, so it has no NVIDIA handler to name)"
	operatorCDI = "NVIDIA/gpu-operator@v26.7.0:controllers/object_controls.go (transformDevicePluginCtrForCDI)"
	devCharCmd  = tkv + "cmd/nvidia-ctk/system/create-dev-char-symlinks/create-dev-char-symlinks.go"
	devCharUse  = "NVIDIA/gpu-operator@v26.7.0:cmd/nvidia-validator/main.go (createDevCharSymlinks, dev root per driver)"
	devNodesCmd = tkv + "cmd/nvidia-ctk/system/create-device-nodes/create-device-nodes.go " +
		"(--load-kernel-modules: chroot <root> /sbin/modprobe nvidia, nvidia-uvm, nvidia-modeset; --control-devices: mknod under <dev-root>/dev)"
	devCharPrep = "NVIDIA/gpu-operator@v26.7.0:cmd/nvidia-validator/main.go (createDevCharSymlinks: modules loaded, control nodes made, then linked); " +
		tkv + "cmd/nvidia-ctk/system/create-dev-char-symlinks/create-dev-char-symlinks.go (needs nvidia-uvm's major in /proc/devices)"
	ctkInImage = toolkitImage + " (nvidia-ctk is not on the image's PATH from v1.18: only unpacked under /artifacts); " +
		toolkitInstall + " (installs nvidia-ctk to <install dir>/toolkit, a wrapper that runs nvidia-ctk.real)"
)

const dp = deviceplugin.ContainerName

var devicePluginContract = []requirement{
	{source: pluginMain + " (--gds-enabled, --mofed-enabled, --gdrcopy-enabled: GDS_ENABLED, MOFED_ENABLED, GDRCOPY_ENABLED); " +
		pluginManager + ":61-63 (the CDI spec's /dev/nvidia-fs*, /dev/infiniband, /dev/gdrdrv); " + pluginServer + ":339-347; " +
		"NVIDIA/gpu-operator@v26.7.0:controllers/object_controls.go:1579-1587 (TransformDevicePlugin: GDS sets GDS_ENABLED and MOFED_ENABLED, GDRCopy GDRCOPY_ENABLED)",
		need: "hands GPU pods GPUDirect Storage's and GDRCopy's devices where the modules are loaded, and nothing more where they are not",
		check: func(p *podCase) error {
			gds := []func(*podCase) error{noEnv(dp, "GDS_ENABLED"), noEnv(dp, "MOFED_ENABLED")}
			if p.spec.GDS.IsEnabled() {
				gds = []func(*podCase) error{env(dp, "GDS_ENABLED", "true"), env(dp, "MOFED_ENABLED", "true")}
			}
			gdrcopy := noEnv(dp, "GDRCOPY_ENABLED")
			if p.spec.GDRCopy.IsEnabled() {
				gdrcopy = env(dp, "GDRCOPY_ENABLED", "true")
			}
			return all(append(gds, gdrcopy)...)(p)
		}},
	{source: pluginMain + " (--driver-root: the host path, for device specs and its CDI spec); " + pluginRoot + " (NVML loaded from --container-driver-root)",
		need: "knows the node's driver root on the host, and sees it read-only where it loads NVML from",
		check: all(
			envBy(dp, "NVIDIA_DRIVER_ROOT", func(p *podCase) string { return p.spec.DriverRootPath(p.variant.DriverRoot) }),
			envBy(dp, "DRIVER_ROOT_CTR_PATH", func(p *podCase) string { return toolkit.DriverRootInContainer(p.spec, p.variant.DriverRoot) }),
			hostMountBy(dp, func(p *podCase) mount {
				return mount{host: toolkit.DriverRootSource(p.spec, p.variant.DriverRoot), at: toolkit.DriverRootInContainer(p.spec, p.variant.DriverRoot),
					readOnly: true, propagation: corev1.MountPropagationHostToContainer}
			}))},
	{source: pluginServer + " (sockets under pluginapi.DevicePluginPath, /var/lib/kubelet/device-plugins in its container)",
		need: "registers with the kubelet, whose root hostPaths.kubeletRootDir names",
		check: hostMountBy(dp, func(p *podCase) mount {
			return mount{host: path.Join(p.spec.KubeletRoot(), "device-plugins"), at: "/var/lib/kubelet/device-plugins"}
		})},
	{source: pluginServer + " (apiDeviceSpecs stats /dev in its own container, unless every strategy is CDI)", need: "passes device specs: privileged, to see /dev",
		check: all(env(dp, "PASS_DEVICE_SPECS", "true"), privileged(dp, true))},
	{source: pluginMain + " (watches kubelet.sock and registers again; creates no socket when it finds no GPU)",
		need:  "no liveness probe on its socket, which would crash-loop a node without usable GPUs",
		check: probe(dp, "liveness", nil)},
	{source: operatorPlugin, need: "runs with the RuntimeClass where the runtime has the NVIDIA handler, without one on CRI-O",
		check: runtimeClass},
	{source: pluginMain + " (--config-file, env CONFIG_FILE: read at start and on SIGHUP); " + pluginConfigLoad + " (fails on a file it cannot open or parse)",
		need: "reads the node's configuration (time-slicing), the file its DaemonSet was rendered for, from the operator's validated " +
			"copy: a broken edit of the user's ConfigMap never reaches a plugin that starts",
		check: nodeConfig(dp)},
	{source: pluginMain + " (--device-list-strategy cdi-annotations, cdi-cri); " + pluginServer + " (Allocate: CDI device names in annotations and in the CRI response); " + operatorCDI,
		need:  "with CDI, hands out GPUs by CDI name, in the annotations containerd and CRI-O read",
		check: all(env(dp, "DEVICE_LIST_STRATEGY", "cdi-annotations,cdi-cri"), env(dp, "CDI_ANNOTATION_PREFIX", "cdi.k8s.io/")),
		where: byCDI},
	{source: pluginManager + " (writes k8s.device-plugin.nvidia.com-gpu.json when it starts); " + pluginCDI + " (to /var/run/cdi, naming --nvidia-cdi-hook-path, a host path)",
		need: "with CDI, writes its spec to the host's CDI directory, naming the hook the toolkit installed",
		check: all(hostMount(dp, mount{host: toolkit.CDISpecDir, at: toolkit.CDISpecDir}),
			envBy(dp, "NVIDIA_CDI_HOOK_PATH", func(p *podCase) string { return toolkit.CDIHook(p.spec.ToolkitInstallDir()) })),
		where: cdiOn},
	{source: toolkitInstall + " (the management spec, which the runtime hands the plugin for every GPU, is written once the driver is loaded; the toolkit stays through a driver upgrade)",
		need:  "with CDI, starts only once the management spec names the driver that runs",
		check: waitsForManagementSpec,
		where: cdiOn},
	{source: pluginMain + " (NVIDIA_DEV_ROOT, default the driver root; the dev root in the container is the driver root's /dev, or / without one); " +
		"NVIDIA/gpu-operator@v26.7.0:cmd/nvidia-validator/driver.go (getDriverInfo: dev root / beside a host's driver)",
		need:  "with CDI, names the device nodes by their host path in its spec: the driver container's, or the host's /dev",
		check: envBy(dp, "NVIDIA_DEV_ROOT", func(p *podCase) string { return toolkit.DevRootPath(p.spec, p.variant.DriverRoot) }),
		where: cdiOn},
	{source: pluginMain + " (--device-list-strategy, default envvar)", need: "without CDI, passes GPU lists as volume mounts, which only an allocation creates",
		check: env(dp, "DEVICE_LIST_STRATEGY", "volume-mounts"), where: cdiOff},
	{source: devCharCmd + "; " + devCharUse + "; " + ctkInImage,
		need: "links /dev/char to every node the driver can have, at the node's driver root on the host, before it starts, with the toolkit's installed nvidia-ctk",
		check: all(
			scriptHas(deviceplugin.DevCharContainerName, `"$ctk" system create-dev-char-symlinks --create-all`),
			scriptHas(deviceplugin.DevCharContainerName, `for c in "$TOOLKIT_DIR/nvidia-ctk" /artifacts/deb/usr/bin/nvidia-ctk /artifacts/rpm/usr/bin/nvidia-ctk; do`),
			envBy(deviceplugin.DevCharContainerName, "TOOLKIT_DIR", func(p *podCase) string { return path.Join(p.spec.ToolkitInstallDir(), "toolkit") }),
			func(p *podCase) error {
				if !p.spec.Toolkit.IsEnabled() {
					return hostMountless(p, p.spec.ToolkitInstallDir())
				}
				return hostMount(deviceplugin.DevCharContainerName, mount{host: p.spec.ToolkitInstallDir(), at: p.spec.ToolkitInstallDir(), readOnly: true})(p)
			},
			scriptHas(deviceplugin.DevCharContainerName, `ln -sfn "$DEV_ROOT$(readlink "$link")"`),
			envBy(deviceplugin.DevCharContainerName, "DEV_ROOT", devRoot),
			hostMount(deviceplugin.DevCharContainerName, mount{host: "/dev/char", at: "/host-dev-char"}))},
	{source: devNodesCmd + "; " + devCharPrep,
		need: "beside a host's driver, loads its modules through the host's modprobe and makes their control nodes in the host's /dev before linking",
		check: all(
			scriptHas(deviceplugin.DevCharContainerName, `"$ctk" system create-device-nodes --control-devices --load-kernel-modules --root="$HOST_ROOT" --dev-root="$HOST_ROOT"`),
			func(p *podCase) error {
				if toolkit.DriverRootInContainer(p.spec, p.variant.DriverRoot) != toolkit.HostRoot {
					// A driver container, or an installer of its own,
					// loads the modules.
					return noEnv(deviceplugin.DevCharContainerName, "HOST_ROOT")(p)
				}
				return all(env(deviceplugin.DevCharContainerName, "HOST_ROOT", "/host"),
					hostMountBy(deviceplugin.DevCharContainerName, func(p *podCase) mount {
						return mount{host: toolkit.DriverRootSource(p.spec, p.variant.DriverRoot), at: "/host", propagation: corev1.MountPropagationHostToContainer}
					}))(p)
			})},
}

// devRoot is where the node's driver keeps its device nodes on the host,
// without /dev: the driver container's root, or the host's.
func devRoot(p *podCase) string {
	if p.variant.DriverRoot == gpuv1.DriverRootContainer {
		return p.spec.DriverRootPath(p.variant.DriverRoot)
	}
	return ""
}

func TestDevicePluginContract(t *testing.T) { checkAll(t, state.DevicePlugin, devicePluginContract) }

const gfdCtr = gfd.ContainerName

var gfdContract = []requirement{
	{source: gfdMain + " (--output-file; --use-node-feature-api, env GFD_USE_NODE_FEATURE_API, defaults to true from v0.19 and needs an API token); " + gfdOutput,
		need: "writes its labels to a file where nfd-worker reads feature files, not to the NodeFeature API",
		check: all(env(gfdCtr, "GFD_USE_NODE_FEATURE_API", "false"), env(gfdCtr, "GFD_OUTPUT_FILE", gfd.FeaturesDir+"/gfd"),
			hostMount(gfdCtr, mount{host: gfd.FeaturesDir, at: gfd.FeaturesDir}))},
	{source: gfdManifest + " (privileged, host /sys)", need: "reads PCI config space and the machine type from the host's /sys",
		check: all(privileged(gfdCtr, true), hostMount(gfdCtr, mount{host: "/sys", at: "/sys", readOnly: true}))},
	{source: operatorPlugin, need: "gets NVML from the runtime: the RuntimeClass where the runtime has the NVIDIA handler",
		check: runtimeClass},
	{source: pluginFlags + " (CONFIG_FILE, read by the plugin and GFD alike)",
		need:  "reads the device plugin's config, so that its sharing labels match what the plugin advertises",
		check: nodeConfig(gfdCtr)},
	{source: gfdMain + " (--node-name, --namespace)", need: "knows its node and namespace",
		check: all(fieldEnv(gfdCtr, "NODE_NAME", "spec.nodeName"), fieldEnv(gfdCtr, "NAMESPACE", "metadata.namespace"))},
}

func TestGFDContract(t *testing.T) { checkAll(t, state.GPUFeatureDiscovery, gfdContract) }

// nodeConfig checks a container gets the operator's validated copy of
// the device plugin's configurations, never the user's ConfigMap, and the
// node's entry in CONFIG_FILE: its own configuration, or the default.
func nodeConfig(ctr string) func(p *podCase) error {
	return func(p *podCase) error {
		cfg := p.spec.DevicePlugin.Config
		if cfg == nil || cfg.Name == "" {
			return nil
		}
		return all(env(ctr, "CONFIG_FILE", "/config/"+cmp.Or(p.variant.DevicePluginConfig, cfg.Default)),
			configMapAt(ctr, pluginconfig.ValidatedConfigMap, "/config"))(p)
	}
}

// waitsForManagementSpec checks the init container that holds an operand
// until the management spec names the driver that runs, where the
// operator's toolkit writes it.
func waitsForManagementSpec(p *podCase) error {
	if !p.spec.Toolkit.IsEnabled() {
		for _, c := range p.pod.InitContainers {
			if c.Name == toolkit.WaitForSpecName {
				return fmt.Errorf("waits for a management spec that no operator's toolkit writes")
			}
		}
		return nil
	}
	w := toolkit.WaitForSpecName
	return all(scriptHas(w, `grep -qs "\.so\.$(cat "$DRIVER_VERSION_FILE")\$" "$SPEC"`),
		scriptHas(w, `[ -e "$ROOT/toolkit/nvidia-cdi-hook" ] || exit 0`),
		env(w, "SPEC", toolkit.ManagementSpec),
		env(w, "DRIVER_VERSION_FILE", toolkit.DriverVersionFile),
		envBy(w, "ROOT", installDir),
		hostMount(w, mount{host: toolkit.CDISpecDir, at: toolkit.CDISpecDir, readOnly: true}),
		hostMountBy(w, func(p *podCase) mount { return mount{host: installDir(p), at: installDir(p), readOnly: true} }))(p)
}
