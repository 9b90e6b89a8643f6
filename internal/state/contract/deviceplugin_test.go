package contract

import (
	"cmp"
	"testing"

	corev1 "k8s.io/api/core/v1"

	gpuv1 "github.com/gpu-operator/gpu-operator/api/v1"
	"github.com/gpu-operator/gpu-operator/internal/state"
	"github.com/gpu-operator/gpu-operator/internal/state/deviceplugin"
	"github.com/gpu-operator/gpu-operator/internal/state/gfd"
	"github.com/gpu-operator/gpu-operator/internal/state/toolkit"
)

// Sources of the device plugin's and GFD's requirements:
// k8s-device-plugin v0.17.2, which ships both.
const (
	pluginMain     = "NVIDIA/k8s-device-plugin@v0.17.2:cmd/nvidia-device-plugin/main.go"
	pluginRoot     = "NVIDIA/k8s-device-plugin@v0.17.2:cmd/nvidia-device-plugin/root.go"
	pluginServer   = "NVIDIA/k8s-device-plugin@v0.17.2:internal/plugin/server.go"
	gfdMain        = "NVIDIA/k8s-device-plugin@v0.17.2:cmd/gpu-feature-discovery/main.go"
	gfdManifest    = "NVIDIA/k8s-device-plugin@v0.17.2:deployments/static/gpu-feature-discovery-daemonset.yaml"
	pluginFlags    = "NVIDIA/k8s-device-plugin@v0.17.2:api/config/v1/flags.go"
	operatorPlugin = "NVIDIA/gpu-operator@v25.3.1:controllers/object_controls.go (setRuntimeClass: containerd only)"
	devCharCmd     = "NVIDIA/nvidia-container-toolkit@v1.17.8:cmd/nvidia-ctk/system/create-dev-char-symlinks/all.go"
	devCharUse     = "NVIDIA/gpu-operator@v25.3.2:validator/main.go (createDevCharSymlinks, dev root per driver)"
	devNodesCmd    = "NVIDIA/nvidia-container-toolkit@v1.17.8:cmd/nvidia-ctk/system/create-device-nodes/create-device-nodes.go " +
		"(--load-kernel-modules: chroot <root> /sbin/modprobe nvidia, nvidia-uvm, nvidia-modeset; --control-devices: mknod under <dev-root>/dev)"
	devCharPrep = "NVIDIA/gpu-operator@v26.7.0:cmd/nvidia-validator/main.go (createDevCharSymlinks: modules loaded, control nodes made, then linked); " +
		"NVIDIA/nvidia-container-toolkit@v1.17.8:cmd/nvidia-ctk/system/create-dev-char-symlinks/all.go (needs nvidia-uvm's major in /proc/devices)"
)

const dp = deviceplugin.ContainerName

var devicePluginContract = []requirement{
	{source: pluginMain + " (--driver-root: the host path, for device specs); " + pluginRoot + " (NVML loaded from --container-driver-root)",
		need: "knows the node's driver root on the host, and sees it read-only where it loads NVML from",
		check: all(
			envBy(dp, "NVIDIA_DRIVER_ROOT", func(p *podCase) string { return p.variant.DriverRoot.Path() }),
			envBy(dp, "DRIVER_ROOT_CTR_PATH", func(p *podCase) string { return toolkit.DriverRootInContainer(p.variant.DriverRoot) }),
			hostMountBy(dp, func(p *podCase) mount {
				return mount{host: p.variant.DriverRoot.Path(), at: toolkit.DriverRootInContainer(p.variant.DriverRoot),
					readOnly: true, propagation: corev1.MountPropagationHostToContainer}
			}))},
	{source: pluginServer + " (sockets under the kubelet's device-plugins directory)", need: "registers with the kubelet",
		check: hostMount(dp, mount{host: "/var/lib/kubelet/device-plugins", at: "/var/lib/kubelet/device-plugins"})},
	{source: pluginServer + " (apiDeviceSpecs stats /dev in its own container)", need: "passes device specs: privileged, to see /dev",
		check: all(env(dp, "PASS_DEVICE_SPECS", "true"), privileged(dp, true))},
	{source: pluginMain + " (watches kubelet.sock and registers again; creates no socket when it finds no GPU)",
		need:  "no liveness probe on its socket, which would crash-loop a node without usable GPUs",
		check: probe(dp, "liveness", nil)},
	{source: operatorPlugin, need: "runs with the RuntimeClass where the runtime has the NVIDIA handler, without one on CRI-O",
		check: runtimeClass},
	{source: pluginMain + " (--config-file, env CONFIG_FILE: read at start and on SIGHUP)",
		need:  "reads the node's configuration (time-slicing), the file its DaemonSet was rendered for",
		check: nodeConfig(dp)},
	{source: devCharCmd + "; " + devCharUse,
		need: "links /dev/char to every node the driver can have, at the node's driver root on the host, before it starts",
		check: all(
			scriptHas(deviceplugin.DevCharContainerName, "nvidia-ctk system create-dev-char-symlinks --create-all"),
			scriptHas(deviceplugin.DevCharContainerName, `ln -sfn "$DEV_ROOT$(readlink "$link")"`),
			envBy(deviceplugin.DevCharContainerName, "DEV_ROOT", devRoot),
			hostMount(deviceplugin.DevCharContainerName, mount{host: "/dev/char", at: "/host-dev-char"}))},
	{source: devNodesCmd + "; " + devCharPrep,
		need: "beside a host's driver, loads its modules through the host's modprobe and makes their control nodes in the host's /dev before linking",
		check: all(
			scriptHas(deviceplugin.DevCharContainerName, `nvidia-ctk system create-device-nodes --control-devices --load-kernel-modules --root="$HOST_ROOT" --dev-root="$HOST_ROOT"`),
			func(p *podCase) error {
				if p.variant.DriverRoot != gpuv1.DriverRootHost {
					// A driver container loads its own modules.
					return noEnv(deviceplugin.DevCharContainerName, "HOST_ROOT")(p)
				}
				return all(env(deviceplugin.DevCharContainerName, "HOST_ROOT", "/host"),
					hostMount(deviceplugin.DevCharContainerName, mount{host: "/", at: "/host", propagation: corev1.MountPropagationHostToContainer}))(p)
			})},
}

// devRoot is where the node's driver keeps its device nodes on the host,
// without /dev: the driver container's root, or the host's.
func devRoot(p *podCase) string {
	if p.variant.DriverRoot == gpuv1.DriverRootContainer {
		return p.variant.DriverRoot.Path()
	}
	return ""
}

func TestDevicePluginContract(t *testing.T) { checkAll(t, state.DevicePlugin, devicePluginContract) }

const gfdCtr = gfd.ContainerName

var gfdContract = []requirement{
	{source: gfdMain + " (--output-file)", need: "writes its labels where nfd-worker reads feature files",
		check: all(env(gfdCtr, "GFD_OUTPUT_FILE", gfd.FeaturesDir+"/gfd"), hostMount(gfdCtr, mount{host: gfd.FeaturesDir, at: gfd.FeaturesDir}))},
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

// nodeConfig checks a container gets the device plugin's ConfigMap and the
// node's entry in CONFIG_FILE: its own configuration, or the default.
func nodeConfig(ctr string) func(p *podCase) error {
	return func(p *podCase) error {
		cfg := p.spec.DevicePlugin.Config
		if cfg == nil || cfg.Name == "" {
			return nil
		}
		return all(env(ctr, "CONFIG_FILE", "/config/"+cmp.Or(p.variant.DevicePluginConfig, cfg.Default)), configMapAt(ctr, cfg.Name, "/config"))(p)
	}
}
