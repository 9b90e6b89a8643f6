package v1alpha1

import (
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	gpuv1 "github.com/gpu-operator/gpu-operator/api/v1"
)

// NVIDIADriver is one driver pool: the GPU nodes its nodeSelector and
// nodeAffinity select (the default one: those no other selects) run the
// driver it describes, and move to a new one through the upgrade within its
// upgradePolicy. The operator acts on NVIDIADrivers while the ClusterPolicy
// sets driver.useNvidiaDriverCRD. The name becomes the node label
// nvidia.com/gpu.driver-pool and part of the pool's DaemonSet names.
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:scope=Cluster,shortName=nvd;nvdriver;nvdrivers
// +kubebuilder:printcolumn:name="Status",type=string,JSONPath=`.status.state`,description="ready, notReady or disabled"
// +kubebuilder:printcolumn:name="Default",type=boolean,JSONPath=`.spec.default`
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=`.status.readyNodes`,description="nodes whose driver is ready / nodes of the pool"
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
// +kubebuilder:validation:XValidation:rule=`size(self.metadata.name) <= 32 && self.metadata.name.matches('^[a-z0-9]([-a-z0-9]*[a-z0-9])?$')`,message="metadata.name becomes the node label nvidia.com/gpu.driver-pool and part of DaemonSet names: at most 32 lower case letters, digits and '-', starting and ending with a letter or digit"
type NVIDIADriver struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// +kubebuilder:default={}
	Spec   NVIDIADriverSpec   `json:"spec,omitempty"`
	Status NVIDIADriverStatus `json:"status,omitempty"`
}

// NVIDIADriverList is a list of NVIDIADrivers.
//
// +kubebuilder:object:root=true
type NVIDIADriverList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []NVIDIADriver `json:"items"`
}

func init() {
	SchemeBuilder.Register(&NVIDIADriver{}, &NVIDIADriverList{})
}

// Driver types.
const (
	DriverTypeGPU             = "gpu"
	DriverTypeVGPU            = "vgpu"
	DriverTypeVGPUHostManager = "vgpu-host-manager"
)

// NVIDIADriverSpec is one driver's settings and the nodes it serves.
// +kubebuilder:validation:XValidation:rule=`!has(self.default) || !self.default || !has(self.nodeSelector) || size(self.nodeSelector) == 0`,message="default NVIDIADriver must not use nodeSelector: it takes the GPU nodes no other NVIDIADriver selects",fieldPath=".nodeSelector"
// +kubebuilder:validation:XValidation:rule=`!has(self.usePrecompiled) || !self.usePrecompiled || ((!has(self.gds) || !has(self.gds.enabled) || !self.gds.enabled) && (!has(self.gdrcopy) || !has(self.gdrcopy.enabled) || !self.gdrcopy.enabled))`,message="GPUDirect Storage and GDRCopy build their modules against the driver's sources, which precompiled images do not carry (as at NVIDIA): turn gds and gdrcopy off, or create an NVIDIADriver without usePrecompiled",fieldPath=".usePrecompiled"
// +kubebuilder:validation:XValidation:rule=`!has(self.default) || !self.default || !has(self.nodeAffinity)`,message="default NVIDIADriver must not use nodeAffinity: it takes the GPU nodes no other NVIDIADriver selects",fieldPath=".nodeAffinity"
// +kubebuilder:validation:XValidation:rule=`!has(self.usePrecompiled) || !self.usePrecompiled || !has(self.version) || !self.version.startsWith('sha256:')`,message="a precompiled driver's image is chosen per kernel (<version>-<kernel>-<os>): version must be a driver branch such as 580, not a digest",fieldPath=".version"
// +kubebuilder:validation:XValidation:rule=`(has(self.usePrecompiled) && self.usePrecompiled) || !has(self.version) || self.version.contains('.') || self.version.startsWith('sha256:')`,message="a driver branch such as 580 names images only with usePrecompiled: write the whole version, such as 580.126.20",fieldPath=".version"
type NVIDIADriverSpec struct {
	// Default makes this the driver of every GPU node no other NVIDIADriver
	// selects; it must not have a nodeSelector. Two defaults conflict.
	// +kubebuilder:default=false
	// +optional
	Default bool `json:"default"`

	// DriverType is gpu. vgpu and vgpu-host-manager are accepted and not
	// run: their nodes get no driver, and the status says so.
	// +kubebuilder:default=gpu
	// +kubebuilder:validation:Enum=gpu;vgpu;vgpu-host-manager
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="driverType is immutable: create another NVIDIADriver for another driver type"
	// +optional
	DriverType string `json:"driverType,omitempty"`

	// UsePrecompiled runs NVIDIA's precompiled driver images, built for one
	// kernel each (tag <version>-<kernel>-<os>): no compiler or kernel
	// headers on the node, and modules the distribution signed, which
	// Secure Boot hosts need. version is then a driver branch, such as 580.
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="usePrecompiled is immutable: create another NVIDIADriver and move the nodes to it"
	// +optional
	UsePrecompiled *bool `json:"usePrecompiled,omitempty"`

	// KernelModuleType chooses the driver's kernel modules: open,
	// proprietary, or auto, the one the driver recommends for the node's
	// GPUs.
	// +kubebuilder:default=auto
	// +kubebuilder:validation:Enum=auto;open;proprietary
	// +optional
	KernelModuleType string `json:"kernelModuleType,omitempty"`

	// AllocationMode is how the nodes this NVIDIADriver serves hand out
	// their GPUs: device-plugin or dra; empty means the ClusterPolicy's
	// driver.allocationMode. An extension of this operator: NVIDIA's
	// NVIDIADriver has no such field, and its objects apply unchanged.
	// +optional
	AllocationMode gpuv1.AllocationMode `json:"allocationMode,omitempty"`

	// Repository is the registry path of the driver image, such as
	// nvcr.io/nvidia; empty when image is a whole path.
	// +optional
	Repository gpuv1.Repository `json:"repository,omitempty"`

	// Image is the driver image name, or its whole path when repository is
	// empty.
	// +kubebuilder:default="nvcr.io/nvidia/driver"
	// +optional
	Image gpuv1.ImageName `json:"image,omitempty"`

	// Version is the driver version, such as 595.91.07, to which the
	// operator appends each node's OS (595.91.07-ubuntu22.04); a driver
	// branch such as 580 with usePrecompiled; or an image digest. Empty
	// means the ClusterPolicy's driver.version.
	// +kubebuilder:validation:MaxLength=71
	// +kubebuilder:validation:XValidation:rule=`size(self) == 0 || self.matches('^([0-9]+([.][0-9]+){0,2}|sha256:[a-f0-9]{64})$')`,message="must be a driver version such as 595.91.07, a branch such as 580 (with usePrecompiled), or an image digest written sha256:<64 lower case hex digits>; the operator adds the OS suffix"
	// +optional
	Version string `json:"version,omitempty"`

	// ImagePullPolicy of the driver pod's containers.
	// +kubebuilder:validation:Enum=Always;IfNotPresent;Never
	// +optional
	ImagePullPolicy corev1.PullPolicy `json:"imagePullPolicy,omitempty"`

	// ImagePullSecrets names Secrets in the operator namespace used to pull
	// the driver image.
	// +kubebuilder:validation:MaxItems=16
	// +listType=set
	// +optional
	ImagePullSecrets []gpuv1.ObjectName `json:"imagePullSecrets,omitempty"`

	// Resources of the driver container.
	// +optional
	Resources *gpuv1.ResourceRequirements `json:"resources,omitempty"`

	// Args replace the driver container's arguments; the first must be
	// init.
	// +kubebuilder:validation:MaxItems=64
	// +kubebuilder:validation:items:MaxLength=4096
	// +kubebuilder:validation:XValidation:rule=`size(self) == 0 || self[0] == 'init'`,message="args replace the driver container's arguments, whose first must be init: write for example [init, -m, \"8\"]"
	// +listType=atomic
	// +optional
	Args []string `json:"args,omitempty"`

	// Env is added to the driver container.
	// +kubebuilder:validation:MaxItems=64
	// +listType=map
	// +listMapKey=name
	// +optional
	Env []gpuv1.EnvVar `json:"env,omitempty"`

	// RepoConfig names a ConfigMap in the operator namespace of package
	// repository files the driver container builds from.
	// +optional
	RepoConfig *ConfigMapRef `json:"repoConfig,omitempty"`

	// CertConfig names a ConfigMap in the operator namespace of CA
	// certificates the driver container trusts.
	// +optional
	CertConfig *ConfigMapRef `json:"certConfig,omitempty"`

	// KernelModuleConfig names a ConfigMap in the operator namespace of
	// kernel module parameter files, NVIDIA's layout: keys nvidia.conf,
	// nvidia-uvm.conf, nvidia-modeset.conf, nvidia-peermem.conf, each line
	// one parameter such as NVreg_CoherentGPUMemoryMode=driver (nvidia.conf
	// holds NVreg_ ones); another key or line holds the pool's drivers as
	// they are, with the reason. A change is a new driver, rolled through
	// the upgrade. Who may edit the ConfigMap sets the driver's parameters
	// on every node of the pool (docs/security.md).
	// +optional
	KernelModuleConfig *ConfigMapRef `json:"kernelModuleConfig,omitempty"`

	// GPUDirectRDMA loads nvidia-peermem beside the driver, for GPUDirect
	// RDMA with MOFED (the network operator's, or the host's with
	// useHostMofed).
	// +optional
	GPUDirectRDMA *gpuv1.GPUDirectRDMASpec `json:"rdma,omitempty"`

	// GPUDirectStorage loads nvidia-fs in a container of the driver pod.
	// +optional
	GPUDirectStorage *gpuv1.GPUDirectStorageSpec `json:"gds,omitempty"`

	// GDRCopy loads gdrdrv in a container of the driver pod.
	// +optional
	GDRCopy *gpuv1.GDRCopySpec `json:"gdrcopy,omitempty"`

	// UpgradePolicy says how this driver's nodes move to a new driver:
	// this pool's own budget. Unset means the ClusterPolicy's
	// driver.upgradePolicy.
	// +optional
	UpgradePolicy *gpuv1.DriverUpgradePolicySpec `json:"upgradePolicy,omitempty"`

	// Manager is NVIDIA's k8s-driver-manager section: its env says how GPU
	// pods leave a node of this driver whose driver pod a person replaced
	// outside an upgrade; its image fields are refused (no driver manager
	// container runs).
	// +optional
	Manager *gpuv1.DriverManagerSpec `json:"manager,omitempty"`

	// NodeSelector is the labels a GPU node must all carry to run this
	// driver; empty selects every GPU node. Select on labels of your own
	// (such as driver.config=gold): the nvidia.com/gpu.* labels GFD writes
	// come and go as the GPU stack does, and a node leaving the selection
	// moves through a driver upgrade.
	// +kubebuilder:validation:XValidation:rule=`self.all(k, k == 'nvidia.com/gpu.present' || (!k.startsWith('nvidia.com/gpu.') && !k.startsWith('nvidia.com/mig.') && k != 'nvidia.com/gpu-operator.driver.owner'))`,message="must not select on nvidia.com/gpu.* or nvidia.com/mig.* labels other than nvidia.com/gpu.present: the operator and GFD write and change them as the GPU stack does. Label the nodes yourself, for example driver.config=gold"
	// +optional
	NodeSelector gpuv1.Labels `json:"nodeSelector,omitempty"`

	// NodeAffinity narrows the selection further: a GPU node must also
	// match its requiredDuringSchedulingIgnoredDuringExecution terms.
	// preferred terms are ignored.
	// +optional
	NodeAffinity *corev1.NodeAffinity `json:"nodeAffinity,omitempty"`

	// Labels are added to the driver DaemonSets and pods, over the
	// ClusterPolicy's daemonsets.labels.
	// +optional
	Labels gpuv1.Labels `json:"labels,omitempty"`

	// Annotations are added to the driver DaemonSets and pods, over the
	// ClusterPolicy's daemonsets.annotations.
	// +optional
	Annotations gpuv1.Annotations `json:"annotations,omitempty"`

	// Tolerations of the driver pods; unset means the ClusterPolicy's
	// daemonsets.tolerations.
	// +kubebuilder:validation:MaxItems=32
	// +listType=atomic
	// +optional
	Tolerations []gpuv1.Toleration `json:"tolerations,omitempty"`

	// PriorityClassName of the driver pods; empty means the ClusterPolicy's
	// daemonsets.priorityClassName.
	// +optional
	PriorityClassName gpuv1.ObjectName `json:"priorityClassName,omitempty"`

	// PodSecurityContext of the driver pods; unset means the
	// ClusterPolicy's daemonsets.podSecurityContext.
	// +optional
	PodSecurityContext *corev1.PodSecurityContext `json:"podSecurityContext,omitempty"`

	// HostNetwork runs the driver pods in the node's network namespace,
	// as the ClusterPolicy's driver.hostNetwork.
	// +optional
	HostNetwork *bool `json:"hostNetwork,omitempty"`

	// StartupProbe, LivenessProbe and ReadinessProbe tune the driver
	// container's probes, as the ClusterPolicy's driver fields of the
	// same names.
	// +kubebuilder:validation:XValidation:rule=`!has(self.successThreshold) || self.successThreshold == 1`,message="a startup probe's successThreshold must be 1 (Kubernetes refuses any other)"
	// +optional
	StartupProbe *gpuv1.ContainerProbeSpec `json:"startupProbe,omitempty"`
	// +kubebuilder:validation:XValidation:rule=`!has(self.successThreshold) || self.successThreshold == 1`,message="a liveness probe's successThreshold must be 1 (Kubernetes refuses any other)"
	// +optional
	LivenessProbe *gpuv1.ContainerProbeSpec `json:"livenessProbe,omitempty"`
	// +optional
	ReadinessProbe *gpuv1.ContainerProbeSpec `json:"readinessProbe,omitempty"`

	// SecretEnv names a Secret in the operator namespace set as the driver
	// container's environment, as the ClusterPolicy's driver.secretEnv.
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:XValidation:rule=`size(self) == 0 || self.matches('^[a-z0-9]([-a-z0-9]*[a-z0-9])?([.][a-z0-9]([-a-z0-9]*[a-z0-9])?)*$')`,message="must be empty or the name of a Secret: a lower case DNS subdomain"
	// +optional
	SecretEnv string `json:"secretEnv,omitempty"`

	UnsupportedFields `json:",inline"`
}

// ConfigMapRef names a ConfigMap in the operator namespace.
type ConfigMapRef struct {
	// Name is the ConfigMap's name; empty means none.
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:XValidation:rule=`size(self) == 0 || self.matches('^[a-z0-9]([-a-z0-9]*[a-z0-9])?([.][a-z0-9]([-a-z0-9]*[a-z0-9])?)*$')`,message="must be empty or a lower case DNS subdomain: letters a-z, digits, '-' and '.', starting and ending with a letter or digit"
	// +optional
	Name string `json:"name,omitempty"`
}

// Named returns the ConfigMap's name, or "" for none.
func (r *ConfigMapRef) Named() string {
	if r == nil {
		return ""
	}
	return r.Name
}

// UnsupportedFields are NVIDIADriver fields of the NVIDIA GPU Operator that
// this operator accepts, keeps and does not act on, each for the reason
// its refused tag gives; the status lists the ones set.
type UnsupportedFields struct {
	// +optional
	UseOpenKernelModules *apiextensionsv1.JSON `json:"useOpenKernelModules,omitempty" refused:"NVIDIA deprecated it for kernelModuleType and reads it nowhere (v26.7.0): set kernelModuleType: open"`
	// +optional
	LicensingConfig *apiextensionsv1.JSON `json:"licensingConfig,omitempty" refused:"vGPU is out of scope"`
	// +optional
	VirtualTopologyConfig *apiextensionsv1.JSON `json:"virtualTopologyConfig,omitempty" refused:"vGPU is out of scope"`
}

// IsPrecompiled reports whether the driver runs precompiled images.
func (s *NVIDIADriverSpec) IsPrecompiled() bool { return s.UsePrecompiled != nil && *s.UsePrecompiled }

// Runs reports whether the operator runs this driver type.
func (s *NVIDIADriverSpec) Runs() bool { return s.DriverType == "" || s.DriverType == DriverTypeGPU }

// IgnoredFields returns the JSON paths of the fields set in the spec that
// this operator accepts only for compatibility.
func (s *NVIDIADriverSpec) IgnoredFields() []string { return gpuv1.PathsOf(s.RefusedFields()) }

// RefusedFields returns "<path>: <why>" for each field IgnoredFields
// lists: what status.ignoredFields holds.
func (s *NVIDIADriverSpec) RefusedFields() []string {
	return append(gpuv1.Refusals(s, "spec"), gpuv1.ManagerEnvRefusals(s.Manager, "spec.manager")...)
}
