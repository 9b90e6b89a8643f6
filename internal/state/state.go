package state

import (
	"cmp"
	"regexp"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	gpuv1 "github.com/gpu-operator/gpu-operator/api/v1"
	"github.com/gpu-operator/gpu-operator/internal/render"
)

// Name names a state. Per-node state names are also the operand names of the
// node labels nvidia.com/gpu.deploy.<name> and nvidia.com/gpu.state.<name>.
type Name string

// The states of the GPU node stack.
const (
	NodeFeatureDiscovery Name = "node-feature-discovery"
	Driver               Name = "driver"
	ContainerToolkit     Name = "container-toolkit"
	MIGManager           Name = "mig-manager"
	MPSControlDaemon     Name = "mps-control-daemon"
	DevicePlugin         Name = "device-plugin"
	DRADriver            Name = "dra-driver"
	DCGM                 Name = "dcgm"
	DCGMExporter         Name = "dcgm-exporter"
	GPUFeatureDiscovery  Name = "gpu-feature-discovery"
	// CUDAWorkload is the workload proof: a pod that asks for one GPU as
	// workloads do and runs a CUDA program. It has no DaemonSet: the node
	// controller makes its pod on each node (internal/state/cudaworkload).
	CUDAWorkload Name = "cuda-workload"
)

// Scope says where a state is judged.
type Scope int

const (
	// PerNode states run a pod on each GPU node, gated on the node by the
	// states before them, and carry a state label on each node.
	PerNode Scope = iota
	// ClusterWide states run for the whole cluster (NFD runs on every node,
	// GPU or not) and gate nothing per node: a node is a GPU node only once
	// NFD has labelled it.
	ClusterWide
)

// Operand renders the objects of one state. Implementations are pure: the
// same input gives the same objects, with no API calls.
type Operand interface {
	// Enabled reports whether the policy deploys the operand.
	Enabled(spec *gpuv1.ClusterPolicySpec) bool
	// Render returns every object of the operand, whole, ready for
	// server-side apply, whether or not the operand is enabled.
	Render(in RenderInput) ([]client.Object, error)
	// Kinds lists every kind Render can return, so that objects the
	// operand no longer renders (it was disabled, a node pool went away)
	// are found and pruned.
	Kinds() []schema.GroupVersionKind
}

// RenderInput is what an operand renders from.
type RenderInput struct {
	// Policy is the active ClusterPolicy, with its defaults filled in.
	Policy *gpuv1.ClusterPolicy
	// Namespace is where the operator runs and deploys namespaced objects.
	Namespace string
	// Gate is the node affinity a per-node state's pods require: the node
	// is a GPU node, the operand may run there and every prerequisite is
	// ready or disabled there. Empty for cluster-wide states.
	Gate []corev1.NodeSelectorRequirement
	// GateEither are alternatives, one of which must hold beside Gate:
	// a state that starts after others but stays once ready is gated on
	// either. Empty when Gate alone decides.
	GateEither [][]corev1.NodeSelectorRequirement
	// DriverPools are the driver node pools with the operating systems of
	// their GPU nodes: the driver runs one DaemonSet per pool and OS, each
	// with its own image tag.
	DriverPools []DriverPool
	// Variants are the node variants in use among the GPU nodes, the
	// policy's default first. An operand whose pod depends on the variant
	// renders one DaemonSet for each distinct projection (VariantsFor).
	// Empty means the default variant alone.
	Variants []Variant
	// ServiceMonitorAvailable is true when the Prometheus Operator's
	// ServiceMonitor kind is served.
	ServiceMonitorAvailable bool
	// BindsOperandClusterRoles is true where the operator binds the
	// operands' ClusterRoles that the install ships (the chart, the
	// kustomize config), each while its operand runs; false under OLM,
	// whose clusterPermissions bind them at install.
	BindsOperandClusterRoles bool
	// DevicePluginConfigDigests holds a digest of each configuration
	// nodes can run, by name, as the validated copy of devicePlugin.config's
	// files holds it (pluginconfig.ValidatedConfigMap): its new content
	// rolls the pods that read it.
	DevicePluginConfigDigests map[string]string
	// MPSConfigs are the configurations nodes can run that share GPUs with
	// MPS: their nodes run the MPS control daemon.
	MPSConfigs map[string]bool
	// DCGMMetrics is the metrics list the exporters run, "" when
	// dcgmExporter.config names none: the named ConfigMap's, or, where
	// that one is gone or broken, the last good copy the operator kept.
	DCGMMetrics string
	// DRAInUse is true while some node pool is in allocation mode dra, or
	// some node still is: the DRA driver's objects exist only then.
	DRAInUse bool
	// DRADriver is the DRA driver's settings; nil means the policy's
	// draDriver.
	DRADriver *gpuv1.DRADriverSpec
	// NRIPluginPods is true while a toolkit pod made to run the NRI plugin
	// is still there: its admission guard stays until the last one goes.
	NRIPluginPods bool
}

// DRA returns the DRA driver's settings the operand renders with.
func (in RenderInput) DRA() *gpuv1.DRADriverSpec {
	if in.DRADriver != nil {
		return in.DRADriver
	}
	return &in.Policy.Spec.DRADriver
}

// GPUDirect reports whether some driver pool loads GPUDirect Storage's
// nvidia_fs and GDRCopy's gdrdrv: the policy's gds and gdrcopy, or an
// NVIDIADriver's.
func (in RenderInput) GPUDirect() (gds, gdrcopy bool) {
	gds, gdrcopy = in.Policy.Spec.GDS.IsEnabled(), in.Policy.Spec.GDRCopy.IsEnabled()
	for _, p := range in.DriverPools {
		gds, gdrcopy = gds || p.GDS.IsEnabled(), gdrcopy || p.GDRCopy.IsEnabled()
	}
	return gds, gdrcopy
}

// RunsMPS reports whether the nodes of a variant share their GPUs with
// MPS: the configuration they run, the policy's default for none.
func (in RenderInput) RunsMPS(v Variant) bool {
	cfg := in.Policy.Spec.DevicePlugin.Config
	if cfg == nil || cfg.Name == "" {
		return false
	}
	return in.MPSConfigs[cmp.Or(v.DevicePluginConfig, cfg.Default)]
}

// DevicePluginConfigFile names the configuration file the pods of a
// variant read: the one it runs, the policy's default for none; "" when
// there is none or no copy of it was ever valid, and the device plugin
// runs its built-in defaults rather than fail on a file it cannot read.
func (in RenderInput) DevicePluginConfigFile(v Variant) string {
	cfg := in.Policy.Spec.DevicePlugin.Config
	if cfg == nil || cfg.Name == "" {
		return ""
	}
	name := cmp.Or(v.DevicePluginConfig, cfg.Default)
	if _, ok := in.DevicePluginConfigDigests[name]; !ok {
		return ""
	}
	return name
}

// NFD's labels for a node's operating system.
const (
	LabelOSReleaseID = "feature.node.kubernetes.io/system-os_release.ID"
	LabelOSVersionID = "feature.node.kubernetes.io/system-os_release.VERSION_ID"
	// LabelKernelVersion is the kernel the node runs, as NFD labels it
	// (uname -r, characters a label cannot hold made _; absent past 63
	// characters). Precompiled driver images are tagged with it.
	LabelKernelVersion = "feature.node.kubernetes.io/kernel-version.full"
)

// DriverPool is a driver node pool: its name, driver settings and the
// operating systems of its GPU nodes, sorted.
type DriverPool struct {
	Name string
	// NVIDIADriver says an NVIDIADriver of the pool's name declares it.
	NVIDIADriver bool
	// Driver is the pool's driver settings (its version pinned), in the
	// shape of the policy's driver section whether a ClusterPolicy pool or
	// an NVIDIADriver declared it.
	Driver *gpuv1.DriverSpec
	// Daemonsets are the pool's pod settings shared with other operands:
	// the policy's, with an NVIDIADriver's own over them.
	Daemonsets *gpuv1.DaemonsetsSpec
	OSReleases []OSRelease
	// ModuleParams are the files of the pool's kernelModuleConfig
	// ConfigMap, read by the controller; nil when it names none.
	ModuleParams *ModuleParams
	// Precompiled pools run NVIDIA's precompiled images: one DaemonSet
	// per kernel and OS in Kernels, not per OS.
	Precompiled bool
	Kernels     []Kernel
	// KeptKernels are kernels some nodes' drivers run whose image under
	// the pool's settings no check has pulled yet (a new branch, say):
	// their DaemonSets are not rendered but kept as they are, so that no
	// pod, even one a person deletes, starts from an image nobody pulled.
	KeptKernels []Kernel
	// GDS and GDRCopy are the pool's GPUDirect Storage and GDRCopy
	// modules, each a container of the driver pod when enabled.
	GDS     *gpuv1.GPUDirectStorageSpec
	GDRCopy *gpuv1.GDRCopySpec
}

// Kernel is a kernel version (NFD's label value) on an OS: what a
// precompiled driver image is built for.
type Kernel struct {
	Version string
	OS      OSRelease
}

// ModuleParams are the kernel module parameter files of a ConfigMap: its
// keys, sorted, and a digest of their content, which is part of the driver
// pod's template so that a new content is a new driver.
type ModuleParams struct {
	ConfigMap string
	Files     []string
	Digest    string
}

// ModuleParamFiles are the files NVIDIA's driver container reads kernel
// module parameters from, under /drivers (gpu-driver-container nvidia-driver,
// _get_module_params: nvidia.conf, nvidia-uvm.conf, nvidia-modeset.conf,
// nvidia-peermem.conf). A kernelModuleConfig key is mounted into the
// privileged driver container at /drivers/<key>, beside the driver's
// sources: any other key is refused, not mounted.
var ModuleParamFiles = []string{"nvidia.conf", "nvidia-uvm.conf", "nvidia-modeset.conf", "nvidia-peermem.conf"}

// moduleParamLine is one kernel module parameter, name=value: the driver
// container reads each line of a file as one word of `options <module>`
// in its modprobe config (_get_module_params), so a line with a space
// would set several, and a comment would reach modprobe as a parameter.
var moduleParamLine = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*=[^\s#]*$`)

// BadModuleParamLine returns the first line of a module parameter file
// that is not one parameter (empty lines are passed over), with its
// number and why; 0 when every line is one. nvidia.conf's parameters are
// the nvidia module's NVreg_ ones.
func BadModuleParamLine(file, content string) (int, string, string) {
	for i, line := range strings.Split(content, "\n") {
		line = strings.TrimSuffix(line, "\r")
		switch {
		case line == "":
		case !moduleParamLine.MatchString(line):
			return i + 1, line, "each line is one parameter, name=value, without spaces or comments"
		case file == "nvidia.conf" && !strings.HasPrefix(line, "NVreg_"):
			return i + 1, line, "the nvidia module's parameters are NVreg_<name>=<value>"
		}
	}
	return 0, "", ""
}

// OSRelease is an operating system as NFD labels it, such as ubuntu 22.04.
type OSRelease struct {
	ID, VersionID string
}

// String is the OS as driver image tags name it: ubuntu22.04, rhel9.4.
func (o OSRelease) String() string { return o.ID + o.VersionID }

// OSReleaseOf returns the OS NFD found on a node, and false when NFD has
// not labelled it.
func OSReleaseOf(labels map[string]string) (OSRelease, bool) {
	o := OSRelease{ID: labels[LabelOSReleaseID], VersionID: labels[LabelOSVersionID]}
	return o, o.ID != "" && o.VersionID != ""
}

// State is one node of the graph.
type State struct {
	Name  Name
	Scope Scope
	After []Name // direct prerequisites
	// StartsAfter are prerequisites of the state's start on a node alone:
	// the state waits for them to be ready or disabled there before its
	// pod is first created, but once it is ready it stays when they stop
	// being ready. The container toolkit starts after the driver, whose
	// files its CDI spec names, and is not torn down (its runtime config
	// reverted, the runtime restarted) when the driver is replaced.
	StartsAfter []Name
	Operand     Operand
	// Mode is the allocation mode of the nodes the state runs on: its
	// pods are gated on the node's LabelAllocationMode. Empty for every
	// node, whatever its mode.
	Mode gpuv1.AllocationMode
	// GatesOnlyWhenLabelled makes a node without the state's label pass
	// the gates of the states after it: a state added to the graph after
	// nodes were labelled must not take their operands off them before
	// the node controller has written its label.
	GatesOnlyWhenLabelled bool
}

// Workload starts the description of one of the state's workloads from the
// input: the policy, the namespace and the gate; the operand adds what is
// its own.
func (in RenderInput) Workload(name string, st Name, c *gpuv1.ContainerSettings, image string, pod corev1.PodSpec) render.Workload {
	return render.Workload{
		Policy: in.Policy, Namespace: in.Namespace, Gate: in.Gate, GateEither: in.GateEither,
		Name: name, State: string(st), Component: c, Image: image, Pod: pod,
	}
}

// DriverConfigDigestEnv is the driver container's configuration digest
// (gpu-driver-container ubuntu22.04/nvidia-driver at 06a208c:
// _should_skip_kernel_module_reload, _store_driver_digest). A driver
// container whose digest equals the one stored in
// /run/nvidia/nvidia-driver.state by the install that loaded the running
// modules keeps them: it installs the userspace files, starts the
// daemons and mounts its root again, and neither unloads nor builds. The
// operator sets it to the pod template's hash, which it leaves out of
// that hash (render.Workload.HashEnv): any change that replaces a driver
// through the upgrade changes the digest, and nothing else does.
const DriverConfigDigestEnv = "DRIVER_CONFIG_DIGEST"
