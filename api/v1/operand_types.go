package v1

import (
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
)

// The image coordinates and their defaults are declared per operand: the
// markers cannot vary per embedding, and each operand has its own image.
// Everything else comes from the embedded ComponentSpec. An absent image or
// version is filled in by its default, so the rules only reject an explicit
// empty value.

// DriverSpec is the NVIDIA driver container.
// +kubebuilder:validation:XValidation:rule=`(has(self.enabled) && !self.enabled) || ((!has(self.image) || size(self.image) > 0) && (!has(self.version) || size(self.version) > 0))`,message="image and version must be set while enabled is true"
// +kubebuilder:validation:XValidation:rule=`!has(self.usePrecompiled) || !self.usePrecompiled || !has(self.version) || self.version.matches('^[0-9]+$')`,message="with usePrecompiled, version is a driver branch such as 580: NVIDIA tags precompiled images <branch>-<kernel>-<os>",fieldPath=".version"
// +kubebuilder:validation:XValidation:rule=`(has(self.usePrecompiled) && self.usePrecompiled) || !has(self.version) || !self.version.matches('^[0-9]+$')`,message="a driver branch such as 580 names images only with usePrecompiled: write the whole version, such as 580.126.20",fieldPath=".version"
// +kubebuilder:validation:XValidation:rule=`!has(self.nodePools) || self.nodePools.all(p, !has(p.version) || (has(self.usePrecompiled) && self.usePrecompiled) == p.version.matches('^[0-9]+$'))`,message="a pool's version is a driver branch such as 580 with usePrecompiled, and a whole version such as 580.126.20 or a digest without",fieldPath=".nodePools"
// +kubebuilder:validation:XValidation:rule=`!has(self.args) || size(self.args) == 0 || self.args[0] == 'init'`,message="args replace the driver container's arguments, whose first must be init: write for example [init, -m, \"8\"] (init accepts only -a/--accept-license and -m/--max-threads N)",fieldPath=".args"
// +kubebuilder:validation:XValidation:rule=`!has(self.nodePools) || self.nodePools.all(p, !has(p.devicePluginConfig) || size(p.devicePluginConfig) == 0 || (has(p.allocationMode) ? p.allocationMode : (has(self.allocationMode) ? self.allocationMode : 'device-plugin')) != 'dra')`,message="a pool in allocation mode dra runs no device plugin, so devicePluginConfig has no effect there: remove it, and share GPUs through draDriver.featureGates (MPSSupport, TimeSlicingSettings)",fieldPath=".nodePools"
type DriverSpec struct {
	ComponentSpec `json:",inline"`

	// Repository is the registry path of the driver image.
	// +kubebuilder:default="nvcr.io/nvidia"
	// +optional
	Repository Repository `json:"repository,omitempty"`
	// Image is the driver image name.
	// +kubebuilder:default=driver
	// +optional
	Image ImageName `json:"image,omitempty"`
	// Version pins the driver: a driver version such as 535.154.05, to which
	// the operator appends each node pool's OS (535.154.05-ubuntu22.04), or
	// an image digest.
	// +kubebuilder:default="595.91.07"
	// +optional
	Version DriverVersion `json:"version,omitempty"`

	// KernelModuleType chooses the driver's kernel modules: open, proprietary,
	// or auto, the one the driver recommends for the node's GPUs (open
	// from Turing on, with driver 560 and later).
	// +kubebuilder:default=auto
	// +kubebuilder:validation:Enum=auto;open;proprietary
	// +optional
	KernelModuleType string `json:"kernelModuleType,omitempty"`

	// AllocationMode is how the default pool's nodes, and every pool that
	// names no mode of its own, serve their GPUs: device-plugin (the
	// nvidia.com/gpu resource) or dra (ResourceClaims of the DRA driver,
	// configured under draDriver). A pool that changes mode moves node by
	// node within its upgrade budget, its GPU pods evicted first.
	// +kubebuilder:default=device-plugin
	// +optional
	AllocationMode AllocationMode `json:"allocationMode,omitempty"`

	// UpgradePolicy says how nodes move to a new driver.
	// +kubebuilder:default={}
	// +optional
	UpgradePolicy DriverUpgradePolicySpec `json:"upgradePolicy,omitempty"`

	// NodePools pin a driver version for the nodes matching each pool's
	// nodeSelector. A node matching no pool belongs to the default pool,
	// which uses version. Every pool has its own upgrade budget, under
	// upgradePolicy.
	// +kubebuilder:validation:MaxItems=16
	// +kubebuilder:validation:XValidation:rule=`self.all(a, self.all(b, a.name == b.name || a.nodeSelector.exists(k, k in b.nodeSelector && a.nodeSelector[k] != b.nodeSelector[k])))`,message="two pools have overlapping nodeSelectors, so a node could match both: every two pools must require different values of some label they both name"
	// +listType=map
	// +listMapKey=name
	// +optional
	NodePools []DriverNodePool `json:"nodePools,omitempty"`

	// RepoConfig names a ConfigMap in the operator namespace whose keys are
	// package repository files. The driver container adds them to its
	// repository directory (/etc/yum.repos.d on RHEL, /etc/apt/sources.list.d
	// on Ubuntu) before it builds the driver: a mirror for air-gapped nodes.
	// +optional
	RepoConfig *DriverRepoConfig `json:"repoConfig,omitempty"`

	// CertConfig names a ConfigMap in the operator namespace whose keys are
	// CA certificates (PEM) the driver container trusts when it downloads
	// packages, such as a mirror's private CA.
	// +optional
	CertConfig *DriverCertConfig `json:"certConfig,omitempty"`

	// KernelModuleConfig names a ConfigMap in the operator namespace of
	// kernel module parameter files, NVIDIA's layout: keys nvidia.conf,
	// nvidia-uvm.conf, nvidia-modeset.conf, nvidia-peermem.conf, each line
	// one parameter such as NVreg_CoherentGPUMemoryMode=driver (nvidia.conf
	// holds NVreg_ ones); another key or line holds the pool's drivers as
	// they are, with the reason. A change is a new driver, rolled through
	// the upgrade. Who may edit the ConfigMap sets the driver's parameters
	// on every node of the pool (docs/security.md).
	// +optional
	KernelModuleConfig *DriverKernelModuleConfig `json:"kernelModuleConfig,omitempty"`

	// RDMA loads nvidia-peermem beside the driver, for GPUDirect RDMA
	// with Mellanox (NVIDIA) network cards: MOFED from NVIDIA's network
	// operator, or the host's with useHostMofed.
	// +optional
	RDMA *GPUDirectRDMASpec `json:"rdma,omitempty"`

	// UsePrecompiled runs NVIDIA's precompiled driver images: built for
	// one kernel each (tag <version>-<kernel>-<os>, version a branch such
	// as 580), they compile nothing on the node, so Secure Boot hosts load
	// their signed modules. One DaemonSet per kernel and OS in use; a node
	// moves to its new kernel's image through the upgrade, once a pull of
	// that image succeeded. repoConfig and certConfig are not used.
	// +optional
	UsePrecompiled *bool `json:"usePrecompiled,omitempty"`

	// UseNvidiaDriverCRD hands driver management to NVIDIADriver resources
	// (nvidia.com/v1alpha1), one per driver pool: version, nodePools and
	// the settings above are then ignored, except upgradePolicy, the budget
	// of an NVIDIADriver without its own. Turning it on keeps every driver
	// an NVIDIADriver of the same name as its pool (default for the
	// default pool) describes alike; the others move through the upgrade.
	// +optional
	UseNvidiaDriverCRD *bool `json:"useNvidiaDriverCRD,omitempty"`

	// StartupProbe tunes the driver container's startup probe (nvidia-smi
	// answers): each field set replaces the default (initialDelaySeconds
	// 60, or 5 for a precompiled driver, periodSeconds 10, timeoutSeconds
	// 60, failureThreshold 120: a build may take 21 minutes), as NVIDIA's
	// does. Raise failureThreshold for slower builds.
	// +kubebuilder:validation:XValidation:rule=`!has(self.successThreshold) || self.successThreshold == 1`,message="a startup probe's successThreshold must be 1 (Kubernetes refuses any other)"
	// +optional
	StartupProbe *ContainerProbeSpec `json:"startupProbe,omitempty"`
	// LivenessProbe gives the driver container a liveness probe, nvidia-smi
	// answering, with these settings (timeoutSeconds unset: the startup
	// probe's; the others unset: the Kubernetes defaults): the kubelet
	// restarts a driver container whose driver stops answering, and a
	// restarted driver container cannot unload the modules GPU pods hold.
	// None by default, as at NVIDIA.
	// +kubebuilder:validation:XValidation:rule=`!has(self.successThreshold) || self.successThreshold == 1`,message="a liveness probe's successThreshold must be 1 (Kubernetes refuses any other)"
	// +optional
	LivenessProbe *ContainerProbeSpec `json:"livenessProbe,omitempty"`
	// ReadinessProbe gives the driver container a readiness probe,
	// nvidia-smi answering, with these settings (timeoutSeconds unset: the
	// startup probe's; the others unset: the Kubernetes defaults): a
	// driver pod that stops answering is not ready, and past the grace
	// period the states after the driver restart on its node. None by
	// default, as at NVIDIA.
	// +optional
	ReadinessProbe *ContainerProbeSpec `json:"readinessProbe,omitempty"`

	// SecretEnv names a Secret in the operator namespace whose keys are set
	// as environment variables of the driver container and of its
	// GPUDirect Storage and GDRCopy containers (envFrom), as NVIDIA's does:
	// a proxy's credentials or a repository token for the build. It is
	// part of the driver pod: setting it replaces the drivers through the
	// upgrade, so create the Secret first. One that does not exist keeps
	// each new driver pod from starting (its driver state says why), and
	// the upgrade stops at its first nodes, within its budget. The
	// operator does not read Secrets to check: it holds no right to.
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:XValidation:rule=`size(self) == 0 || self.matches('^[a-z0-9]([-a-z0-9]*[a-z0-9])?([.][a-z0-9]([-a-z0-9]*[a-z0-9])?)*$')`,message="must be empty or the name of a Secret: a lower case DNS subdomain"
	// +optional
	SecretEnv string `json:"secretEnv,omitempty"`

	// Manager is NVIDIA's k8s-driver-manager section. Its env says how GPU
	// pods leave a node whose driver pod a person replaced outside an
	// upgrade (driverManager.env: ENABLE_GPU_POD_EVICTION and the drain
	// settings); no driver manager container runs, so its image fields are
	// refused.
	// +optional
	Manager *DriverManagerSpec `json:"manager,omitempty"`

	UnsupportedDriverFields `json:",inline"`
}

// ContainerProbeSpec tunes a probe of a container, NVIDIA's fields: zero
// (unset) leaves a field as it is.
type ContainerProbeSpec struct {
	// InitialDelaySeconds is how long after the container starts the
	// first probe runs.
	// +kubebuilder:validation:Minimum=0
	// +optional
	InitialDelaySeconds int32 `json:"initialDelaySeconds,omitempty"`
	// TimeoutSeconds is how long a probe may take.
	// +kubebuilder:validation:Minimum=1
	// +optional
	TimeoutSeconds int32 `json:"timeoutSeconds,omitempty"`
	// PeriodSeconds is how often the probe runs.
	// +kubebuilder:validation:Minimum=1
	// +optional
	PeriodSeconds int32 `json:"periodSeconds,omitempty"`
	// SuccessThreshold is how many successes in a row make a failed probe
	// succeed again.
	// +kubebuilder:validation:Minimum=1
	// +optional
	SuccessThreshold int32 `json:"successThreshold,omitempty"`
	// FailureThreshold is how many failures in a row fail the probe.
	// +kubebuilder:validation:Minimum=1
	// +optional
	FailureThreshold int32 `json:"failureThreshold,omitempty"`
}

// UnsupportedDriverFields are driver fields of the NVIDIA GPU Operator that
// this operator accepts, keeps and does not act on, each for the reason
// its refused tag gives.
type UnsupportedDriverFields struct {
	// +optional
	UseOpenKernelModules *apiextensionsv1.JSON `json:"useOpenKernelModules,omitempty" refused:"NVIDIA deprecated it for kernelModuleType and reads it nowhere (v26.7.0): set kernelModuleType: open"`
	// +optional
	LicensingConfig *apiextensionsv1.JSON `json:"licensingConfig,omitempty" refused:"vGPU is out of scope"`
	// +optional
	VirtualTopology *apiextensionsv1.JSON `json:"virtualTopology,omitempty" refused:"vGPU is out of scope"`
}

// ToolkitSpec is the NVIDIA Container Toolkit.
// +kubebuilder:validation:XValidation:rule=`!has(self.env) || self.env.all(e, !has(e.valueFrom) || !(e.name in ['CONTAINERD_CONFIG', 'CONTAINERD_SOCKET', 'CRIO_HOOKS_DIR', 'NRI_SOCKET', 'RUNTIME_CONFIG', 'RUNTIME_CONFIG_SOURCE', 'RUNTIME_CONFIG_SOURCES', 'RUNTIME_DROP_IN_CONFIG', 'RUNTIME_DROP_IN_CONFIG_HOST_PATH', 'RUNTIME_SOCKET']))`,message="env: the runtime's paths (RUNTIME_CONFIG, CONTAINERD_SOCKET, ...) take a value, not valueFrom: the operator reads them to mount the runtime's files"
// +kubebuilder:validation:XValidation:rule=`(has(self.enabled) && !self.enabled) || ((!has(self.image) || size(self.image) > 0) && (!has(self.version) || size(self.version) > 0))`,message="image and version must be set while enabled is true"
type ToolkitSpec struct {
	ComponentSpec `json:",inline"`

	// Repository is the registry path of the toolkit image.
	// +kubebuilder:default="nvcr.io/nvidia/k8s"
	// +optional
	Repository Repository `json:"repository,omitempty"`
	// Image is the toolkit image name.
	// +kubebuilder:default=container-toolkit
	// +optional
	Image ImageName `json:"image,omitempty"`
	// Version is the toolkit image tag or digest. The default is pinned by
	// NVIDIA's digest of the tag (gpu-operator v26.7.0's bundle).
	// +kubebuilder:default="v1.20.0@sha256:f8c647d581f7c8b178efdb7e6c94f5fb6eb12ebc05e2157fa314d327560fcb7a"
	// +optional
	Version ImageVersion `json:"version,omitempty"`

	// InstallDir is where the toolkit installs the NVIDIA runtime on the
	// host; the runtime's config names it, so it must be a directory the
	// host keeps and may run binaries from (GKE's Container-Optimized OS:
	// /home/kubernetes/bin/nvidia).
	// +kubebuilder:default="/usr/local/nvidia"
	// +kubebuilder:validation:Pattern=`^/`
	// +kubebuilder:validation:MaxLength=4096
	// +kubebuilder:validation:XValidation:rule=`!self.matches('(^|/)[.][.](/|$)')`,message="must not hold a '..' segment: name the directory itself"
	// +kubebuilder:validation:XValidation:rule=`!self.matches('^/+$')`,message="must not be / alone: the operands would write to the host's root; name a directory"
	// +optional
	InstallDir string `json:"installDir,omitempty"`
}

// DevicePluginSpec is the NVIDIA device plugin.
// +kubebuilder:validation:XValidation:rule=`!has(self.env) || self.env.all(e, !has(e.valueFrom) || e.name != 'DEVICE_LIST_STRATEGY')`,message="env: DEVICE_LIST_STRATEGY takes a value, not valueFrom: the operator reads it to configure the toolkit to match"
// +kubebuilder:validation:XValidation:rule=`(has(self.enabled) && !self.enabled) || ((!has(self.image) || size(self.image) > 0) && (!has(self.version) || size(self.version) > 0))`,message="image and version must be set while enabled is true"
type DevicePluginSpec struct {
	ComponentSpec `json:",inline"`

	// Repository is the registry path of the device plugin image.
	// +kubebuilder:default="nvcr.io/nvidia"
	// +optional
	Repository Repository `json:"repository,omitempty"`
	// Image is the device plugin image name.
	// +kubebuilder:default=k8s-device-plugin
	// +optional
	Image ImageName `json:"image,omitempty"`
	// Version is the device plugin image tag or digest. The default is
	// pinned by NVIDIA's digest of the tag (gpu-operator v26.7.0's bundle).
	// +kubebuilder:default="v0.20.0@sha256:a61ba9fd8efb82f3a79f877f7580e02c1e8e7593f62473644bc9c79e315c3312"
	// +optional
	Version ImageVersion `json:"version,omitempty"`

	// Config points the plugin at a ConfigMap of named configurations.
	// +optional
	Config *DevicePluginConfig `json:"config,omitempty"`

	// MPS is where MPS sharing keeps its pipes and shared memory on the
	// host, for the device plugin and the MPS control daemon that run on
	// nodes whose configuration shares GPUs with MPS.
	// +kubebuilder:default={}
	// +optional
	MPS DevicePluginMPS `json:"mps,omitempty"`
}

// DevicePluginMPS configures MPS sharing.
type DevicePluginMPS struct {
	// Root is the host directory of MPS's pipes (<root>/<resource>/pipe)
	// and shared memory (<root>/shm), which the control daemon creates and
	// the device plugin mounts into the pods it gives MPS-shared GPUs.
	// +kubebuilder:default="/run/nvidia/mps"
	// +kubebuilder:validation:MaxLength=255
	// +kubebuilder:validation:Pattern=`^(/[-_a-zA-Z0-9][-._a-zA-Z0-9]*)+/?$`
	// +optional
	Root string `json:"root,omitempty"`
}

// DefaultMPSRoot is MPS's root when unset, as the device plugin's.
const DefaultMPSRoot = "/run/nvidia/mps"

// RootOrDefault is Root, or DefaultMPSRoot when unset.
func (m *DevicePluginMPS) RootOrDefault() string {
	if m.Root == "" {
		return DefaultMPSRoot
	}
	return m.Root
}

// DevicePluginConfig names the ConfigMap with device plugin configurations.
// +kubebuilder:validation:XValidation:rule=`!has(self.default) || size(self.default) == 0 || (has(self.name) && size(self.name) > 0)`,message="default names a configuration inside the ConfigMap, so name must be set as well"
type DevicePluginConfig struct {
	// Name of a ConfigMap in the operator namespace whose keys are named
	// device plugin configurations; empty means none, as the NVIDIA GPU
	// Operator's chart writes it.
	// +kubebuilder:validation:MaxLength=253
	// The operator keeps the last good copy of each file in ConfigMap
	// nvidia-device-plugin-validated-configs, which the device plugin, GFD
	// and the MPS control daemon read: an edit that breaks a file, or
	// removes it or the ConfigMap, changes no running node.
	// +kubebuilder:validation:XValidation:rule=`size(self) == 0 || self.matches('^[a-z0-9]([-a-z0-9]*[a-z0-9])?([.][a-z0-9]([-a-z0-9]*[a-z0-9])?)*$')`,message="must be empty or a lower case DNS subdomain: letters a-z, digits, '-' and '.', starting and ending with a letter or digit"
	// +kubebuilder:validation:XValidation:rule=`self != 'nvidia-device-plugin-validated-configs'`,message="nvidia-device-plugin-validated-configs is the operator's copy of the validated configurations: name the ConfigMap you write"
	// +optional
	Name string `json:"name,omitempty"`
	// Default is the key of the configuration used on nodes without the
	// nvidia.com/device-plugin.config label, in no driver pool with a
	// devicePluginConfig.
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:XValidation:rule=`size(self) == 0 || self.matches('^[-._a-zA-Z0-9]+$')`,message="must be a ConfigMap key: letters, digits, '-', '_' or '.'"
	// +optional
	Default string `json:"default,omitempty"`
}

// GFDSpec is GPU Feature Discovery. It runs from the device plugin image.
// +kubebuilder:validation:XValidation:rule=`(has(self.enabled) && !self.enabled) || ((!has(self.image) || size(self.image) > 0) && (!has(self.version) || size(self.version) > 0))`,message="image and version must be set while enabled is true"
type GFDSpec struct {
	ComponentSpec `json:",inline"`

	// Repository is the registry path of the GFD image.
	// +kubebuilder:default="nvcr.io/nvidia"
	// +optional
	Repository Repository `json:"repository,omitempty"`
	// Image is the GFD image name.
	// +kubebuilder:default=k8s-device-plugin
	// +optional
	Image ImageName `json:"image,omitempty"`
	// Version is the GFD image tag or digest. The default is pinned by
	// NVIDIA's digest of the tag (gpu-operator v26.7.0's bundle).
	// +kubebuilder:default="v0.20.0@sha256:a61ba9fd8efb82f3a79f877f7580e02c1e8e7593f62473644bc9c79e315c3312"
	// +optional
	Version ImageVersion `json:"version,omitempty"`
}

// NFDSpec is Node Feature Discovery.
// +kubebuilder:validation:XValidation:rule=`(has(self.enabled) && !self.enabled) || ((!has(self.image) || size(self.image) > 0) && (!has(self.version) || size(self.version) > 0))`,message="image and version must be set while enabled is true"
type NFDSpec struct {
	ComponentSpec `json:",inline"`

	// Repository is the registry path of the NFD image.
	// +kubebuilder:default="registry.k8s.io/nfd"
	// +optional
	Repository Repository `json:"repository,omitempty"`
	// Image is the NFD image name.
	// +kubebuilder:default=node-feature-discovery
	// +optional
	Image ImageName `json:"image,omitempty"`
	// Version is the NFD image tag or digest.
	// +kubebuilder:default="v0.19.0"
	// +optional
	Version ImageVersion `json:"version,omitempty"`
}
