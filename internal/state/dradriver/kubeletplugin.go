package dradriver

import (
	"path"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"

	gpuv1 "github.com/gpu-operator/gpu-operator/api/v1"
	"github.com/gpu-operator/gpu-operator/internal/render"
	"github.com/gpu-operator/gpu-operator/internal/state"
	"github.com/gpu-operator/gpu-operator/internal/state/toolkit"
)

// Where the plugin sees the host, as NVIDIA's manifests mount it: HOST_ROOT
// is where the GPU plugin looks for the fabric manager and, with
// PassthroughSupport, IOMMU settings and modprobe (cmd/gpu-kubelet-plugin
// nvlib.go, vfio-device.go).
const hostRootInContainer = toolkit.HostRoot

// driverRootInContainer is where both plugins see the node's driver
// root, whichever it is: the driver's code assumes this path beside
// DRIVER_ROOT_CTR_PATH (cmd/gpu-kubelet-plugin/sharing.go: the MPS
// daemon's /dev/shm under /driver-root; pkg/fabricmanager/manager.go: the
// fabric manager's socket under /driver-root/run), so a host's own driver
// at / is mounted there too, as the driver's chart does
// (deployments/helm/dra-driver-nvidia-gpu values.yaml nvidiaDriverRoot /).
const driverRootInContainer = toolkit.DriverRootMount

// Volume names, NVIDIA's (0500_daemonset.yaml L351-388).
const (
	volumeRegistry   = "plugins-registry"
	volumePlugins    = "plugins"
	volumeCDI        = "cdi"
	volumeHostRoot   = "host-root"
	volumeDriverRoot = "driver-install-dir"
)

// The gRPC service both plugins' health servers answer for
// (cmd/gpu-kubelet-plugin/health.go: "liveness").
const healthService = "liveness"

// kubeletPluginPod is the kubelet plugin's pod for one driver root: the
// gpus container, always, and compute-domains when enabled.
//
// It departs from NVIDIA's in two ways. No driver-validation init
// container running NVIDIA's validator: the state graph starts it only
// where the driver state is ready, and the image's own wait (waitForDriver)
// covers the moments the graph cannot, a reboot before the operator has
// seen it. No bash wrapper sourcing the validator's driver-ready file: the
// driver root comes from the node's variant, as for the device plugin.
func kubeletPluginPod(d *gpuv1.DRADriverSpec, image string) func(*gpuv1.ClusterPolicy, state.Variant) corev1.PodSpec {
	return func(cp *gpuv1.ClusterPolicy, v state.Variant) corev1.PodSpec {
		spec := &cp.Spec
		gpus := pluginContainer(spec, v, d, plugin{name: GPUContainer, binary: "gpu-kubelet-plugin", metrics: ":8080",
			health: d.GPUs.KubeletPlugin.Healthcheck, livenessPeriod: 30, writesDriverRoot: true})
		gpus.Env = append(gpus.Env,
			corev1.EnvVar{Name: "HOST_ROOT", Value: hostRootInContainer},
			corev1.EnvVar{Name: "IMAGE_NAME", Value: image},
			// The MPS control daemons the GPU plugin starts run as the
			// plugin's ServiceAccount, as the driver's chart says
			// (templates/kubeletplugin.yaml); NVIDIA's manifest leaves
			// them the namespace's default.
			render.FieldEnv("SERVICE_ACCOUNT_NAME", "spec.serviceAccountName"))
		// They pull as it does (cmd/gpu-kubelet-plugin/main.go:
		// IMAGE_PULL_SECRETS, IMAGE_PULL_POLICY; NVIDIA's manifest sets
		// neither).
		if len(d.ImagePullSecrets) > 0 {
			gpus.Env = append(gpus.Env, corev1.EnvVar{Name: "IMAGE_PULL_SECRETS", Value: secretNames(d)})
		}
		if d.ImagePullPolicy != "" {
			gpus.Env = append(gpus.Env, corev1.EnvVar{Name: "IMAGE_PULL_POLICY", Value: string(d.ImagePullPolicy)})
		}
		volumes := pluginVolumes(spec, v)
		if d.FeatureGate("PassthroughSupport") {
			// Binding GPUs to vfio-pci writes sysfs and reads the host's
			// modules (0500_daemonset.yaml L236-247).
			gpus.VolumeMounts = append(gpus.VolumeMounts,
				hostPathMount("lib-modules", "/lib/modules/", true, corev1.MountPropagationHostToContainer),
				hostPathMount("sysfs", "/sys/", false, corev1.MountPropagationBidirectional),
				hostPathMount("procfs", "/proc/", false, corev1.MountPropagationBidirectional))
			volumes = append(volumes,
				render.HostPathVolume("lib-modules", "/lib/modules/", corev1.HostPathDirectory),
				render.HostPathVolume("sysfs", "/sys/", corev1.HostPathDirectory),
				render.HostPathVolume("procfs", "/proc/", corev1.HostPathDirectory))
		}
		containers := []corev1.Container{gpus}
		if d.ComputeDomainsEnabled() {
			cd := pluginContainer(spec, v, d, plugin{name: ComputeDomainContainer, binary: "compute-domain-kubelet-plugin",
				metrics: ":8081", health: d.ComputeDomains.KubeletPlugin.Healthcheck, livenessPeriod: 10})
			// NVIDIA labels the node's NVLink clique (nvidia.com/gpu.clique)
			// from this plugin, not from GFD (0500_daemonset.yaml L303-304).
			cd.Env = render.Env(append(cd.Env, corev1.EnvVar{Name: "GPU_CLIQUE_LABEL_ENABLED", Value: "true"}),
				d.ComputeDomains.KubeletPlugin.Env)
			if r := d.ComputeDomains.KubeletPlugin.Resources; r != nil {
				cd.Resources = corev1.ResourceRequirements{Limits: r.Limits, Requests: r.Requests}
			}
			containers = append(containers, cd)
		}
		wait, parent := waitForDriver(spec, v)
		return corev1.PodSpec{
			ServiceAccountName: KubeletPluginServiceAccount,
			// It publishes the node's ResourceSlices.
			AutomountServiceAccountToken: ptr.To(true),
			InitContainers:               []corev1.Container{wait},
			Containers:                   containers,
			Volumes:                      append(volumes, parent),
		}
	}
}

// WaitForDriverContainer waits, before the plugins start, until the node's
// driver root holds an nvidia-smi that answers.
const WaitForDriverContainer = "wait-for-driver"

// volumeDriverRootParent is the driver root's parent directory, where the
// wait looks for the root (the chart's driver-root-parent).
const volumeDriverRootParent = "driver-root-parent"

// waitForDriver is the image's own wait for the driver root, as the
// driver's chart runs it (templates/kubeletplugin.yaml L55-85;
// hack/kubelet-plugin-prestart.sh, in the image at /usr/bin): it links
// /driver-root to the root under its parent, mounted HostToContainer so
// that a driver container's later mount of its root shows, and leaves once
// nvidia-smi --version answers from there, every 10 s until then with a
// hint in its log. The GPU plugin exits at start without the driver's
// libraries (cmd/gpu-kubelet-plugin/nvlib.go); after a reboot the kubelet
// starts it before the operator has reset the node's states, and it would
// crash-loop, its back-off outlasting the driver's return, where it now
// waits. NVIDIA_DRIVER_ROOT is the root as mounted, whose last element the
// script finds under the parent: a host root of / is its own parent.
func waitForDriver(spec *gpuv1.ClusterPolicySpec, v state.Variant) (corev1.Container, corev1.Volume) {
	root := toolkit.DriverRootSource(spec, v.DriverRoot)
	parent := path.Dir(strings.TrimSuffix(root, "/"))
	mount := corev1.VolumeMount{Name: volumeDriverRootParent, MountPath: "/driver-root-parent"}
	if root == "/" {
		parent, mount.ReadOnly = "/", true
	} else {
		mount.MountPropagation = ptr.To(corev1.MountPropagationHostToContainer)
	}
	return corev1.Container{
		Name:    WaitForDriverContainer,
		Command: []string{"bash", "/usr/bin/kubelet-plugin-prestart.sh"},
		Env: []corev1.EnvVar{
			{Name: "NVIDIA_DRIVER_ROOT", Value: root},
			// The runtime must hand it no GPU.
			{Name: "NVIDIA_VISIBLE_DEVICES", Value: "void"},
		},
		// As the chart's: nvidia-smi opens the driver's control device.
		SecurityContext: &corev1.SecurityContext{Privileged: ptr.To(true)},
		VolumeMounts:    []corev1.VolumeMount{mount},
	}, render.HostPathVolume(volumeDriverRootParent, parent, corev1.HostPathDirectoryOrCreate)
}

// prober is a plugin's health check setting.
type prober interface{ ProbePort() (int32, bool) }

// plugin is what differs between the two plugin containers.
type plugin struct {
	name, binary string
	// metrics is HTTP_ENDPOINT, where the plugin serves its metrics.
	metrics        string
	health         prober
	livenessPeriod int32
	// writesDriverRoot mounts the driver root writable, as NVIDIA's
	// manifest (0500_daemonset.yaml L233-235) and the driver's chart
	// (templates/kubeletplugin.yaml L335-337) do for the GPU plugin; the
	// compute-domain plugin only reads it, as the chart says (L200-203),
	// where NVIDIA's manifest mounts it writable too.
	writesDriverRoot bool
}

// pluginContainer is what both plugin containers share: the kubelet's
// plugin directories, the CDI directory, the host and the driver root,
// the health probes, privilege, and the env NVIDIA gives both
// (0500_daemonset.yaml L158-214 and L274-328).
func pluginContainer(spec *gpuv1.ClusterPolicySpec, v state.Variant, d *gpuv1.DRADriverSpec, p plugin) corev1.Container {
	kubelet := spec.KubeletRoot()
	env := []corev1.EnvVar{
		{Name: "HTTP_ENDPOINT", Value: p.metrics},
		{Name: "METRICS_PATH", Value: "/metrics"},
		{Name: "LOG_VERBOSITY", Value: "4"},
		// The runtime must not hand the plugin GPUs: it manages them all.
		{Name: "NVIDIA_VISIBLE_DEVICES", Value: "void"},
		{Name: "CDI_ROOT", Value: toolkit.CDISpecDir},
		{Name: "NVIDIA_MIG_CONFIG_DEVICES", Value: "all"},
		{Name: "KUBELET_REGISTRAR_DIRECTORY_PATH", Value: path.Join(kubelet, "plugins_registry")},
		{Name: "KUBELET_PLUGINS_DIRECTORY_PATH", Value: path.Join(kubelet, "plugins")},
		render.FieldEnv("NODE_NAME", "spec.nodeName"),
		render.FieldEnv("NAMESPACE", "metadata.namespace"),
		// The driver on the host, which the CDI specs name, and where
		// the container sees it.
		{Name: "NVIDIA_DRIVER_ROOT", Value: spec.DriverRootPath(v.DriverRoot)},
		{Name: "DRIVER_ROOT_CTR_PATH", Value: driverRootInContainer},
	}
	if gates := featureGates(d); gates != "" {
		env = append(env, corev1.EnvVar{Name: "FEATURE_GATES", Value: gates})
	}
	port, probed := p.health.ProbePort()
	listen := "-1" // turns the health server off (main.go: --healthcheck-port)
	if probed {
		listen = strconv.Itoa(int(port))
	}
	env = append(env, corev1.EnvVar{Name: "HEALTHCHECK_PORT", Value: listen})

	c := corev1.Container{
		Name:            p.name,
		Command:         []string{p.binary, "-v", "$(LOG_VERBOSITY)"},
		Env:             env,
		SecurityContext: &corev1.SecurityContext{Privileged: ptr.To(true)},
		VolumeMounts:    pluginMounts(spec, p.writesDriverRoot),
	}
	if probed {
		grpc := corev1.ProbeHandler{GRPC: &corev1.GRPCAction{Port: port, Service: ptr.To(healthService)}}
		// Registration and the first publish can take long on a node of
		// many GPUs: ten minutes, checked every second.
		c.StartupProbe = &corev1.Probe{ProbeHandler: grpc, FailureThreshold: 600, PeriodSeconds: 1, TimeoutSeconds: 10}
		c.LivenessProbe = &corev1.Probe{ProbeHandler: grpc, FailureThreshold: 3, PeriodSeconds: p.livenessPeriod, TimeoutSeconds: 10}
	}
	return c
}

// pluginMounts: the plugin registers through the kubelet's registry,
// serves its socket under the kubelet's plugins directory (Bidirectional:
// the kubelet must see the socket the container creates) and writes CDI
// specs where the runtime reads them. The host is read-only at /host and
// the driver root at /driver-root.
func pluginMounts(spec *gpuv1.ClusterPolicySpec, writesDriverRoot bool) []corev1.VolumeMount {
	kubelet := spec.KubeletRoot()
	return []corev1.VolumeMount{
		{Name: volumeRegistry, MountPath: path.Join(kubelet, "plugins_registry")},
		hostPathMount(volumePlugins, path.Join(kubelet, "plugins"), false, corev1.MountPropagationBidirectional),
		{Name: volumeCDI, MountPath: toolkit.CDISpecDir},
		hostPathMount(volumeHostRoot, hostRootInContainer, true, corev1.MountPropagationHostToContainer),
		// HostToContainer: a driver container mounts its root after the
		// pod may have started.
		hostPathMount(volumeDriverRoot, driverRootInContainer, !writesDriverRoot, corev1.MountPropagationHostToContainer),
	}
}

func hostPathMount(name, at string, readOnly bool, propagation corev1.MountPropagationMode) corev1.VolumeMount {
	return corev1.VolumeMount{Name: name, MountPath: at, ReadOnly: readOnly, MountPropagation: ptr.To(propagation)}
}

func pluginVolumes(spec *gpuv1.ClusterPolicySpec, v state.Variant) []corev1.Volume {
	kubelet := spec.KubeletRoot()
	driverRoot := toolkit.DriverRootSource(spec, v.DriverRoot)
	// A driver container's root is created if the driver has not mounted
	// it yet; a host's driver root exists.
	driverRootType := corev1.HostPathDirectoryOrCreate
	if v.DriverRoot == gpuv1.DriverRootHost {
		driverRootType = corev1.HostPathDirectory
	}
	return []corev1.Volume{
		render.HostPathVolume(volumeRegistry, path.Join(kubelet, "plugins_registry"), corev1.HostPathDirectoryOrCreate),
		render.HostPathVolume(volumePlugins, path.Join(kubelet, "plugins"), corev1.HostPathDirectoryOrCreate),
		render.HostPathVolume(volumeCDI, toolkit.CDISpecDir, corev1.HostPathDirectoryOrCreate),
		render.HostPathVolume(volumeHostRoot, spec.HostRoot(), corev1.HostPathDirectory),
		render.HostPathVolume(volumeDriverRoot, driverRoot, driverRootType),
	}
}

// secretNames are the pull secrets, comma-separated, as the driver's
// binaries take them.
func secretNames(d *gpuv1.DRADriverSpec) string {
	names := make([]string, len(d.ImagePullSecrets))
	for i, s := range d.ImagePullSecrets {
		names[i] = string(s)
	}
	return strings.Join(names, ",")
}
