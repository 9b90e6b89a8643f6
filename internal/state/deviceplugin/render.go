package deviceplugin

import (
	"path"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	gpuv1 "github.com/gpu-operator/gpu-operator/api/v1"
	"github.com/gpu-operator/gpu-operator/internal/pluginconfig"
	"github.com/gpu-operator/gpu-operator/internal/render"
	"github.com/gpu-operator/gpu-operator/internal/state"
	"github.com/gpu-operator/gpu-operator/internal/state/toolkit"
)

// Names users know from the NVIDIA GPU Operator.
const (
	DaemonSetName      = "nvidia-device-plugin-daemonset"
	ServiceAccountName = "nvidia-device-plugin"
	// ContainerName is the plugin's container.
	ContainerName = "nvidia-device-plugin"
)

// kubeletDir is where the plugin looks for the kubelet's device plugin
// sockets (k8s-device-plugin v0.20.0, internal/plugin/server.go:
// pluginapi.DevicePluginPath): the kubelet's root's device-plugins on the
// host. The plugin watches the kubelet's socket there and registers again
// when the kubelet restarts.
const kubeletDir = "/var/lib/kubelet/device-plugins"

// configDir is where the devicePlugin.config ConfigMap is mounted.
const configDir = "/config"

// driverRootVolume is the node's driver root on the host: a driver
// container's, or the host's /.
const driverRootVolume = "driver-root"

// dimensions: the plugin loads NVML from the node's driver root, needs
// the RuntimeClass only where the runtime has the NVIDIA handler, and runs
// the node's configuration (time-slicing, MPS).
var dimensions = state.Dimensions{DriverRoot: true, Runtime: true, DevicePluginConfig: true}

// Operand renders the device-plugin state.
type Operand struct{}

// Enabled reports whether the policy deploys the device plugin.
func (Operand) Enabled(spec *gpuv1.ClusterPolicySpec) bool { return spec.DevicePlugin.IsEnabled() }

// Render returns the plugin's ServiceAccount and one DaemonSet per driver
// root and runtime in use.
func (Operand) Render(in state.RenderInput) ([]client.Object, error) {
	spec := &in.Policy.Spec.DevicePlugin
	image := render.Image(string(spec.Repository), string(spec.Image), string(spec.Version))
	// Nodes sharing their GPUs with MPS give the plugin MPS's root.
	gds, gdrcopy := in.GPUDirect()
	pod := func(cp *gpuv1.ClusterPolicy, v state.Variant) corev1.PodSpec {
		p := podSpec(cp, v, in.DevicePluginConfigFile(v))
		p.Containers[0].Env = append(p.Containers[0].Env, gpuDirectEnv(gds, gdrcopy)...)
		if in.RunsMPS(v) {
			env, mounts, volumes := MPSSettings(cp)
			c := &p.Containers[0]
			c.Env, c.VolumeMounts = append(c.Env, env...), append(c.VolumeMounts, mounts...)
			p.Volumes = append(p.Volumes, volumes...)
		}
		return p
	}
	sets, err := in.DaemonSets(DaemonSetName, state.DevicePlugin, &spec.ContainerSettings, image, dimensions, pod)
	if err != nil {
		return nil, err
	}
	return append([]client.Object{render.ServiceAccount(in.Policy, ServiceAccountName, in.Namespace, string(state.DevicePlugin))}, sets...), nil
}

// gpuDirectEnv has the plugin hand GPU pods GPUDirect's devices: with
// GPUDirect Storage /dev/nvidia-fs* and the RDMA devices under
// /dev/infiniband, with GDRCopy /dev/gdrdrv, in its CDI spec and its
// allocations (k8s-device-plugin v0.20.0 cmd/nvidia-device-plugin/main.go
// --gds-enabled, --mofed-enabled, --gdrcopy-enabled;
// cmd/nvidia-device-plugin/plugin-manager.go:61-63;
// internal/plugin/server.go:339-347), as NVIDIA's operator sets them
// (gpu-operator v26.7.0 controllers/object_controls.go:1579-1587,
// TransformDevicePlugin). Without them the modules load and the state is
// ready, but no workload can open the devices. Any pool's setting turns
// them on for every node's plugin: one without the devices gets none
// (the CDI spec lists the device nodes found).
func gpuDirectEnv(gds, gdrcopy bool) []corev1.EnvVar {
	var env []corev1.EnvVar
	if gds {
		env = append(env, corev1.EnvVar{Name: "GDS_ENABLED", Value: "true"}, corev1.EnvVar{Name: "MOFED_ENABLED", Value: "true"})
	}
	if gdrcopy {
		env = append(env, corev1.EnvVar{Name: "GDRCOPY_ENABLED", Value: "true"})
	}
	return env
}

// podSpec is the plugin's pod for one driver root and runtime, reading
// configuration file configFile ("" for none). It is privileged: it opens
// every GPU device node to health-check it, and with PASS_DEVICE_SPECS it
// hands the kubelet device nodes it must see.
func podSpec(cp *gpuv1.ClusterPolicy, v state.Variant, configFile string) corev1.PodSpec {
	root := toolkit.DriverRootInContainer(&cp.Spec, v.DriverRoot)
	env := []corev1.EnvVar{
		{Name: "FAIL_ON_INIT_ERROR", Value: "true"},
		// The toolkit configures the runtime to match (toolkit.isolationEnv).
		{Name: state.EnvDeviceListStrategy, Value: state.DefaultDeviceListStrategy(&cp.Spec)},
		{Name: "DEVICE_ID_STRATEGY", Value: "uuid"},
		{Name: "MIG_STRATEGY", Value: string(cp.Spec.MIG.StrategyOrDefault())},
		{Name: "PASS_DEVICE_SPECS", Value: "true"},
		{Name: "NVIDIA_VISIBLE_DEVICES", Value: "all"},
		{Name: "NVIDIA_DRIVER_CAPABILITIES", Value: "all"},
	}
	// The driver on the host, for the device specs, and where this
	// container sees it, to load NVML from.
	env = append(env, toolkit.DriverRootEnv(&cp.Spec, v.DriverRoot)...)
	mounts := []corev1.VolumeMount{
		{Name: "device-plugins", MountPath: kubeletDir},
		render.ReadOnlyHostMount(driverRootVolume, root),
	}
	volumes := []corev1.Volume{
		render.HostPathVolume("device-plugins", path.Join(cp.Spec.KubeletRoot(), "device-plugins"), corev1.HostPathDirectory),
		render.HostPathVolume(driverRootVolume, toolkit.DriverRootSource(&cp.Spec, v.DriverRoot), driverRootType(root)),
	}
	if cp.Spec.CDI.IsEnabled() {
		cdiEnv, cdiMounts, cdiVolumes := cdiSettings(cp, v)
		env, mounts, volumes = append(env, cdiEnv...), append(mounts, cdiMounts...), append(volumes, cdiVolumes...)
	}
	cfgEnv, cfgMounts, cfgVolumes := ConfigSettings(cp, configFile)
	devChar, devCharVolumes := devCharLinks(cp, v.DriverRoot)
	// The links first: beside a host's driver they load its modules.
	inits := []corev1.Container{devChar}
	volumes = render.AddVolumes(volumes, devCharVolumes...)
	if wait, waitVolumes := toolkit.WaitForSpec(&cp.Spec, render.Image(string(cp.Spec.DevicePlugin.Repository), string(cp.Spec.DevicePlugin.Image), string(cp.Spec.DevicePlugin.Version)),
		cp.Spec.DevicePlugin.ImagePullPolicy); wait != nil {
		inits = append(inits, *wait)
		volumes = render.AddVolumes(volumes, waitVolumes...)
	}
	var secrets []corev1.LocalObjectReference
	for _, s := range cp.Spec.Toolkit.ImagePullSecrets {
		// The /dev/char step runs the toolkit's image.
		secrets = append(secrets, corev1.LocalObjectReference{Name: string(s)})
	}
	return corev1.PodSpec{
		ImagePullSecrets:             secrets,
		ServiceAccountName:           ServiceAccountName,
		AutomountServiceAccountToken: ptr.To(false),
		RuntimeClassName:             state.RuntimeClassName(&cp.Spec, v.Runtime),
		InitContainers:               inits,
		Containers: []corev1.Container{{
			Name:            ContainerName,
			Command:         []string{"nvidia-device-plugin"},
			Env:             append(env, cfgEnv...),
			SecurityContext: &corev1.SecurityContext{Privileged: ptr.To(true)},
			VolumeMounts:    append(mounts, cfgMounts...),
		}},
		Volumes: append(volumes, cfgVolumes...),
	}
}

// driverRootType: the driver container's root is created if the driver
// has not mounted it yet; the host's / always exists.
func driverRootType(inContainer string) corev1.HostPathType {
	if inContainer == toolkit.HostRoot {
		return corev1.HostPathDirectory
	}
	return corev1.HostPathDirectoryOrCreate
}

// ConfigSettings mounts the operator's validated copy of
// devicePlugin.config's files (pluginconfig.ValidatedConfigMap), never the
// user's ConfigMap, and points CONFIG_FILE at file there, the variant's
// configuration (state.RenderInput.DevicePluginConfigFile; "" for none):
// a broken edit of the user's file never reaches a pod that starts. GFD
// and the MPS control daemon get the same, so that the labels GFD writes
// (replicas, sharing strategy) describe what the plugin advertises. The
// binaries read CONFIG_FILE once, at start, and fail on a file they
// cannot open or parse (k8s-device-plugin v0.20.0, api/config/v1/config.go:
// NewConfig, parseConfig; cmd/nvidia-device-plugin/main.go,
// cmd/gpu-feature-discovery/main.go).
func ConfigSettings(cp *gpuv1.ClusterPolicy, file string) ([]corev1.EnvVar, []corev1.VolumeMount, []corev1.Volume) {
	cfg := cp.Spec.DevicePlugin.Config
	if cfg == nil || cfg.Name == "" {
		return nil, nil, nil
	}
	var env []corev1.EnvVar
	if file != "" {
		env = append(env, corev1.EnvVar{Name: "CONFIG_FILE", Value: path.Join(configDir, file)})
	}
	return env,
		[]corev1.VolumeMount{{Name: "config", MountPath: configDir, ReadOnly: true}},
		[]corev1.Volume{render.ConfigMapVolume("config", pluginconfig.ValidatedConfigMap)}
}

// ValidatedConfigs is the operator's ConfigMap of the configurations nodes
// run (pluginconfig.Files.Validated), which ConfigSettings mounts.
func ValidatedConfigs(cp *gpuv1.ClusterPolicy, namespace string, data map[string]string) *corev1.ConfigMap {
	return &corev1.ConfigMap{TypeMeta: render.TypeMeta("v1", "ConfigMap"),
		ObjectMeta: render.ObjectMeta(cp, pluginconfig.ValidatedConfigMap, namespace, string(state.DevicePlugin)), Data: data}
}

// MPSContainerRoot is where the MPS control daemon and the device plugin
// see MPS's root (k8s-device-plugin v0.20.0,
// cmd/mps-control-daemon/mps/root.go: ContainerRoot).
const MPSContainerRoot = "/mps"

// MPSSettings are what a container that uses MPS needs: MPS_ROOT, the host
// directory the device plugin hands to the pods it gives MPS-shared GPUs
// (k8s-device-plugin v0.20.0, cmd/nvidia-device-plugin/main.go:
// --mps-root, required with MPS), the root at MPSContainerRoot, where the
// plugin checks the daemon is up, and its shared memory at /dev/shm.
func MPSSettings(cp *gpuv1.ClusterPolicy) ([]corev1.EnvVar, []corev1.VolumeMount, []corev1.Volume) {
	root := cp.Spec.DevicePlugin.MPS.RootOrDefault()
	return []corev1.EnvVar{{Name: "MPS_ROOT", Value: root}},
		[]corev1.VolumeMount{{Name: "mps-root", MountPath: MPSContainerRoot}, {Name: "mps-shm", MountPath: "/dev/shm"}},
		[]corev1.Volume{
			render.HostPathVolume("mps-root", root, corev1.HostPathDirectoryOrCreate),
			render.HostPathVolume("mps-shm", path.Join(root, "shm"), corev1.HostPathDirectoryOrCreate),
		}
}

// Kinds lists the kinds Render returns.
func (Operand) Kinds() []schema.GroupVersionKind {
	// The validated ConfigMap is rendered beside every state
	// (clusterpolicy.renderAll), and pruned as this state's.
	return []schema.GroupVersionKind{render.KindServiceAccount, render.KindDaemonSet, render.KindConfigMap}
}
