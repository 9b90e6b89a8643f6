package v1

import (
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// ClusterPolicy describes the GPU node stack the operator keeps on every GPU
// node: which operands run, from which images, and how drivers are upgraded.
// Only the oldest ClusterPolicy in a cluster is acted on; any other is marked
// ignored.
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:scope=Cluster
// +kubebuilder:printcolumn:name="Status",type=string,JSONPath=`.status.state`,description="ready, notReady or ignored"
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=`.status.readyNodes`,description="GPU nodes ready on every state / GPU nodes"
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type ClusterPolicy struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// +kubebuilder:default={}
	// +optional
	Spec ClusterPolicySpec `json:"spec,omitempty"`
	// +optional
	Status ClusterPolicyStatus `json:"status,omitempty"`
}

// ClusterPolicyList is a list of ClusterPolicy.
//
// +kubebuilder:object:root=true
type ClusterPolicyList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []ClusterPolicy `json:"items"`
}

func init() {
	SchemeBuilder.Register(&ClusterPolicy{}, &ClusterPolicyList{})
}

// ClusterPolicySpec is the desired GPU node stack. Section and field names
// follow the NVIDIA GPU Operator's ClusterPolicy so that an existing policy
// applies unchanged; sections this operator does not implement are accepted
// as opaque values and listed in status.ignoredFields.
// +kubebuilder:validation:XValidation:rule=`!has(self.driver) || !has(self.driver.usePrecompiled) || !self.driver.usePrecompiled || ((!has(self.gds) || !has(self.gds.enabled) || !self.gds.enabled) && (!has(self.gdrcopy) || !has(self.gdrcopy.enabled) || !self.gdrcopy.enabled))`,message="GPUDirect Storage and GDRCopy build their modules against the driver's sources, which precompiled images do not carry (as at NVIDIA): turn gds and gdrcopy off, or driver.usePrecompiled",fieldPath=".driver.usePrecompiled"
// +kubebuilder:validation:XValidation:rule=`!has(self.cdi) || !has(self.cdi.nriPluginEnabled) || !self.cdi.nriPluginEnabled || !has(self.toolkit) || !has(self.toolkit.enabled) || self.toolkit.enabled`,message="cdi.nriPluginEnabled has the operator's container toolkit inject GPUs: it needs toolkit.enabled=true",fieldPath=".cdi.nriPluginEnabled"
// +kubebuilder:validation:XValidation:rule=`!has(self.cdi) || !has(self.cdi.nriPluginEnabled) || !self.cdi.nriPluginEnabled || !has(self.devicePlugin) || !has(self.devicePlugin.env) || self.devicePlugin.env.all(e, e.name != 'DEVICE_LIST_STRATEGY' || (has(e.value) && e.value.contains('cdi-')))`,message="with cdi.nriPluginEnabled nothing reads GPU lists passed another way: devicePlugin.env DEVICE_LIST_STRATEGY must name cdi-annotations or cdi-cri, or be removed",fieldPath=".devicePlugin.env"
// +kubebuilder:validation:XValidation:rule=`!has(self.cdi) || !has(self.cdi.enabled) || self.cdi.enabled || !has(self.driver) || ((!has(self.driver.allocationMode) || self.driver.allocationMode != 'dra') && (!has(self.driver.nodePools) || self.driver.nodePools.all(p, !has(p.allocationMode) || p.allocationMode != 'dra')))`,message="the DRA driver hands GPUs to containers as CDI specs it writes to /var/run/cdi: allocation mode dra needs cdi.enabled=true",fieldPath=".cdi.enabled"
type ClusterPolicySpec struct {
	// Operator holds settings of the operator itself.
	// +kubebuilder:default={}
	// +optional
	Operator OperatorSpec `json:"operator,omitempty"`

	// Daemonsets holds settings shared by every operand DaemonSet.
	// +kubebuilder:default={}
	// +optional
	Daemonsets DaemonsetsSpec `json:"daemonsets,omitempty"`

	// Driver is the NVIDIA driver container, which loads the kernel modules.
	// +kubebuilder:default={}
	// +optional
	Driver DriverSpec `json:"driver,omitempty"`

	// Toolkit is the NVIDIA Container Toolkit, which lets the container
	// runtime start GPU containers.
	// +kubebuilder:default={}
	// +optional
	Toolkit ToolkitSpec `json:"toolkit,omitempty"`

	// DevicePlugin registers nvidia.com/gpu with the kubelet.
	// +kubebuilder:default={}
	// +optional
	DevicePlugin DevicePluginSpec `json:"devicePlugin,omitempty"`

	// DCGMExporter exports GPU metrics for Prometheus.
	// +kubebuilder:default={}
	// +optional
	DCGMExporter DCGMExporterSpec `json:"dcgmExporter,omitempty"`

	// GFD is GPU Feature Discovery, which labels nodes with GPU properties.
	// +kubebuilder:default={}
	// +optional
	GFD GFDSpec `json:"gfd,omitempty"`

	// NFD is Node Feature Discovery, which labels nodes with their PCI
	// devices and OS; it is how GPU nodes are found. Disable it when the
	// cluster already runs NFD.
	// +kubebuilder:default={}
	// +optional
	NFD NFDSpec `json:"nfd,omitempty"`

	// MIG is how MIG devices are exposed.
	// +kubebuilder:default={}
	// +optional
	MIG MIGSpec `json:"mig,omitempty"`

	// MIGManager partitions MIG-capable GPUs into MIG devices, per node
	// pool or per node. Off unless enabled.
	// +kubebuilder:default={}
	// +optional
	MIGManager MIGManagerSpec `json:"migManager,omitempty"`

	// CDI says whether containers get their GPUs through the Container
	// Device Interface, as by default.
	// +kubebuilder:default={}
	// +optional
	CDI CDISpec `json:"cdi,omitempty"`

	// DRADriver is NVIDIA's DRA driver, which the pools in allocation mode
	// dra (driver.allocationMode, driver.nodePools[].allocationMode) run
	// in place of the device plugin. It renders nothing while no pool is
	// in that mode.
	// +kubebuilder:default={}
	// +optional
	DRADriver DRADriverSpec `json:"draDriver,omitempty"`

	// HostPaths says where nodes keep what the operands reach on the host.
	// +kubebuilder:default={}
	// +optional
	HostPaths HostPathsSpec `json:"hostPaths,omitempty"`

	// DCGM runs NVIDIA's standalone DCGM host engine (nv-hostengine) on
	// every GPU node, as NVIDIA's dcgm section does: DaemonSet nvidia-dcgm,
	// in the chain after the device plugin and before dcgm-exporter, which
	// then reads its node's host engine through Service nvidia-dcgm
	// (internalTrafficPolicy Local) rather than run its own. Absent, no
	// host engine runs: each exporter embeds its own.
	// +optional
	DCGM *DCGMSpec `json:"dcgm,omitempty"`

	// GDS loads NVIDIA's GPUDirect Storage module (nvidia-fs) in a
	// container of each driver pod. Under driver.useNvidiaDriverCRD each
	// NVIDIADriver's own gds counts instead.
	// +optional
	GDS *GPUDirectStorageSpec `json:"gds,omitempty"`
	// GDRCopy loads NVIDIA's GDRCopy module (gdrdrv) in a container of
	// each driver pod. Under driver.useNvidiaDriverCRD each NVIDIADriver's
	// own gdrcopy counts instead.
	// +optional
	GDRCopy *GDRCopySpec `json:"gdrcopy,omitempty"`

	// Validator configures the CUDA workload proof, the cuda-workload
	// state: NVIDIA's validator section, whose image holds the CUDA sample.
	// No validator DaemonSet runs; each state proves itself on each node.
	// +kubebuilder:default={}
	// +optional
	Validator ValidatorSpec `json:"validator,omitempty"`

	// PSA labels the operator's namespace for Pod Security Admission, as
	// NVIDIA's operator does.
	// +optional
	PSA *PSASpec `json:"psa,omitempty"`

	UnsupportedSections `json:",inline"`
}

// UnsupportedSections are sections of the NVIDIA GPU Operator's
// ClusterPolicy that this operator accepts, keeps and does not act on,
// each for the reason its refused tag gives (status.ignoredFields quotes
// it). They are opaque so that no value in them can make a policy invalid.
type UnsupportedSections struct {
	// NodeStatusExporter is accepted and not acted on.
	// +optional
	NodeStatusExporter *apiextensionsv1.JSON `json:"nodeStatusExporter,omitempty" refused:"node-status-exporter does not run: the operator's gpu_operator_* metrics and the nodes' nvidia.com/gpu.state.* labels say what it would"`
	// SandboxWorkloads is accepted and not acted on: out of scope.
	// +optional
	SandboxWorkloads *apiextensionsv1.JSON `json:"sandboxWorkloads,omitempty" refused:"sandbox workloads (GPUs passed to VMs, Kata) are out of scope: nodes run container workloads only"`
	// VGPUManager is accepted and not acted on: out of scope.
	// +optional
	VGPUManager *apiextensionsv1.JSON `json:"vgpuManager,omitempty" refused:"vGPU is out of scope"`
	// VGPUDeviceManager is accepted and not acted on: out of scope.
	// +optional
	VGPUDeviceManager *apiextensionsv1.JSON `json:"vgpuDeviceManager,omitempty" refused:"vGPU is out of scope"`
	// VFIOManager is accepted and not acted on: out of scope.
	// +optional
	VFIOManager *apiextensionsv1.JSON `json:"vfioManager,omitempty" refused:"sandbox workloads (GPUs passed to VMs through VFIO) are out of scope"`
	// SandboxDevicePlugin is accepted and not acted on: out of scope.
	// +optional
	SandboxDevicePlugin *apiextensionsv1.JSON `json:"sandboxDevicePlugin,omitempty" refused:"sandbox workloads (GPUs passed to VMs) are out of scope"`
	// KataManager is accepted and not acted on: out of scope.
	// +optional
	KataManager *apiextensionsv1.JSON `json:"kataManager,omitempty" refused:"Kata containers are out of scope"`
	// KataSandboxDevicePlugin is accepted and not acted on: out of scope.
	// +optional
	KataSandboxDevicePlugin *apiextensionsv1.JSON `json:"kataSandboxDevicePlugin,omitempty" refused:"Kata containers are out of scope"`
	// CCManager is accepted and not acted on: out of scope.
	// +optional
	CCManager *apiextensionsv1.JSON `json:"ccManager,omitempty" refused:"confidential computing is out of scope"`
	// PSP is accepted and not acted on: Kubernetes removed
	// PodSecurityPolicy in 1.25.
	// +optional
	PSP *apiextensionsv1.JSON `json:"psp,omitempty" refused:"Kubernetes removed PodSecurityPolicy in 1.25: set psa.enabled to admit the operands' privileged pods"`
}

// PSASpec is Pod Security Admission for the operator's namespace.
type PSASpec struct {
	// Enabled labels the operator's namespace
	// pod-security.kubernetes.io/enforce, audit and warn = privileged: the
	// driver, toolkit and device plugin run privileged pods, which a
	// cluster enforcing baseline or restricted refuses. Refused for
	// default, kube-system, kube-public and kube-node-lease. Turned off,
	// the labels stay, as NVIDIA's operator leaves them: the operands'
	// next pods would be refused without them; remove them with kubectl
	// label namespace.
	// +optional
	Enabled *bool `json:"enabled,omitempty"`
}

// IsEnabled reports whether the namespace is labelled; off by default.
func (p *PSASpec) IsEnabled() bool { return p != nil && p.Enabled != nil && *p.Enabled }

// OperatorSpec holds settings of the operator itself.
type OperatorSpec struct {
	// DefaultRuntime is the container runtime assumed for a GPU node whose
	// kubelet does not say which runtime it runs. Kubelets report it
	// (status.nodeInfo.containerRuntimeVersion), and the reported runtime
	// wins: the toolkit configures each node's own runtime. docker is
	// accepted because the NVIDIA GPU Operator's chart defaults to it; a node
	// that runs docker (through cri-dockerd) is not supported, and its
	// container-toolkit state fails saying so.
	// +kubebuilder:default=containerd
	// +kubebuilder:validation:Enum=containerd;crio;docker
	// +optional
	DefaultRuntime Runtime `json:"defaultRuntime,omitempty"`

	// RuntimeClass is the name of the RuntimeClass that GPU pods use.
	// +kubebuilder:default=nvidia
	// +optional
	RuntimeClass ObjectName `json:"runtimeClass,omitempty"`

	// ReadinessTaint keeps GPU workloads off a GPU node while its GPU
	// stack is not ready there.
	// +optional
	ReadinessTaint ReadinessTaintSpec `json:"readinessTaint,omitempty"`

	// Remediation repairs GPU nodes whose GPUs the device plugin reports
	// unhealthy, a budgeted number of nodes at a time.
	// +kubebuilder:default={}
	// +optional
	Remediation RemediationSpec `json:"remediation,omitempty"`

	// Maintenance holds what every operation that takes a node out of
	// service shares: driver upgrades, MIG reconfigurations and repairs.
	// +optional
	Maintenance MaintenanceSpec `json:"maintenance,omitempty"`

	// InitContainer is accepted and not acted on, as at NVIDIA.
	// +optional
	InitContainer *apiextensionsv1.JSON `json:"initContainer,omitempty" refused:"NVIDIA's operator does not act on it either (v26.7.0 reads it nowhere)"`
	// UseOpenShiftDriverToolkit is accepted and not acted on.
	// +optional
	UseOpenShiftDriverToolkit *apiextensionsv1.JSON `json:"use_ocp_driver_toolkit,omitempty" refused:"OpenShift's Driver Toolkit is not supported: drivers build in the driver container, or run precompiled (driver.usePrecompiled)"`
	// Labels is accepted and not acted on, as at NVIDIA.
	// +optional
	Labels *apiextensionsv1.JSON `json:"labels,omitempty" refused:"NVIDIA's operator does not act on it either (v26.7.0 reads it nowhere): the chart's operator.labels label the operator's pod, daemonsets.labels the operands'"`
	// Annotations is accepted and not acted on, as at NVIDIA.
	// +optional
	Annotations *apiextensionsv1.JSON `json:"annotations,omitempty" refused:"NVIDIA's operator does not act on it either (v26.7.0 reads it nowhere): the chart's operator.annotations annotate the operator's pod, daemonsets.annotations the operands'"`
	// Metrics is accepted and not acted on: the chart creates the
	// operator's ServiceMonitor.
	// +optional
	Metrics *apiextensionsv1.JSON `json:"metrics,omitempty" refused:"the operator's own ServiceMonitor is the chart's: set operator.metrics.serviceMonitor.enabled in the chart's values"`
}

// MaintenanceSpec is the budget every node operation counts against, on
// top of each operation's own (driver.upgradePolicy, migManager.maxParallel,
// operator.remediation.maxParallel).
type MaintenanceSpec struct {
	// MaxUnavailableNVLinkDomains caps how many NVLink domains of the
	// fleet may have a node out of service at once: held by any
	// operation, cordoned (by anyone) or not Ready. A count, or a
	// percentage of the fleet's domains rounded up. A domain is the nodes
	// GPU feature discovery labels with the same nvidia.com/gpu.clique
	// (<cluster UUID>.<clique ID>), such as the trays of a GB200 NVL72
	// rack, whatever driver pools they are in; a node without the label
	// is a domain of its own. Unset: no cap. 1 keeps maintenance within
	// one rack at a time, and out of a rack that is down already.
	// +kubebuilder:validation:XIntOrString
	// +kubebuilder:validation:MaxLength=10
	// +kubebuilder:validation:XValidation:rule=`type(self) == int ? self >= 1 : self.matches('^([1-9][0-9]{0,8}|(100|[1-9][0-9]?)%)$')`,message="must be a count of at least 1 or a percentage from 1% to 100% (unset for no cap)"
	// +optional
	MaxUnavailableNVLinkDomains *intstr.IntOrString `json:"maxUnavailableNVLinkDomains,omitempty"`
}

// ReadinessTaintSpec configures the readiness taint, TaintGPUNotReady.
type ReadinessTaintSpec struct {
	// Enabled makes the operator keep the taint nvidia.com/gpu.not-ready
	// (NoSchedule) on a GPU node from its discovery, after a reboot and
	// while its driver is replaced, until every enabled state is ready
	// there. Operands tolerate it; GPU workloads wait. Turning it off
	// removes every such taint the operator set.
	// +optional
	Enabled bool `json:"enabled,omitempty"`
}

// Runtime is a container runtime the toolkit can configure.
type Runtime string

// Container runtimes the toolkit can configure.
const (
	RuntimeContainerd Runtime = "containerd"
	RuntimeCRIO       Runtime = "crio"
	RuntimeDocker     Runtime = "docker"
)
