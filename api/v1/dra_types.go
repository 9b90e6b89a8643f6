package v1

import corev1 "k8s.io/api/core/v1"

// AllocationMode is how a node's GPUs reach workloads: the device plugin's
// nvidia.com/gpu extended resource, or Dynamic Resource Allocation
// (ResourceClaims of NVIDIA's DRA driver). A node runs one of the two,
// never both: the kubelet would hand the same GPU out twice.
// +kubebuilder:validation:Enum=device-plugin;dra
type AllocationMode string

const (
	// AllocationDevicePlugin serves nvidia.com/gpu through the device
	// plugin, as every node did before allocation modes existed.
	AllocationDevicePlugin AllocationMode = "device-plugin"
	// AllocationDRA serves GPUs (and NVLink compute domains) as
	// ResourceSlices of NVIDIA's DRA driver.
	AllocationDRA AllocationMode = "dra"
	// AllocationNone is never set by a person: a node carries it on its
	// allocation-mode label while a switch has taken one plugin off and
	// not yet started the other.
	AllocationNone AllocationMode = "none"
)

// DRADriverSpec is NVIDIA's DRA driver for GPUs
// (kubernetes-sigs/dra-driver-nvidia-gpu), which the pools in allocation
// mode dra run in place of the device plugin. Field names are those of
// the draDriver section of NVIDIA's GPUCluster, so that section can be
// copied here unchanged.
// +kubebuilder:validation:XValidation:rule=`!has(self.featureGates) || !('NVMLDeviceHealthCheck' in self.featureGates && self.featureGates['NVMLDeviceHealthCheck']) || !(('DynamicMIG' in self.featureGates && self.featureGates['DynamicMIG']) || ('PassthroughSupport' in self.featureGates && self.featureGates['PassthroughSupport']))`,message="the DRA driver refuses to start with NVMLDeviceHealthCheck and DynamicMIG or PassthroughSupport both on: turn one of them off",fieldPath=".featureGates"
// +kubebuilder:validation:XValidation:rule=`!has(self.featureGates) || !('DynamicMIG' in self.featureGates && self.featureGates['DynamicMIG']) || !(('PassthroughSupport' in self.featureGates && self.featureGates['PassthroughSupport']) || ('MPSSupport' in self.featureGates && self.featureGates['MPSSupport']))`,message="the DRA driver refuses to start with DynamicMIG and PassthroughSupport or MPSSupport both on: turn one of them off",fieldPath=".featureGates"
// +kubebuilder:validation:XValidation:rule=`!has(self.featureGates) || !('IMEXDaemonsWithDNSNames' in self.featureGates && !self.featureGates['IMEXDaemonsWithDNSNames']) || ('ComputeDomainCliques' in self.featureGates && !self.featureGates['ComputeDomainCliques'])`,message="the DRA driver's ComputeDomainCliques, on by default, needs IMEXDaemonsWithDNSNames: with IMEXDaemonsWithDNSNames=false set ComputeDomainCliques=false too",fieldPath=".featureGates"
// +kubebuilder:validation:XValidation:rule=`!has(self.featureGates) || !('DeviceMetadata' in self.featureGates && self.featureGates['DeviceMetadata']) || ('PassthroughSupport' in self.featureGates && self.featureGates['PassthroughSupport'])`,message="the DRA driver's DeviceMetadata needs PassthroughSupport=true: set it, or DeviceMetadata=false",fieldPath=".featureGates"
// +kubebuilder:validation:XValidation:rule=`!has(self.featureGates) || self.featureGates.all(k, k in ['TimeSlicingSettings', 'MPSSupport', 'IMEXDaemonsWithDNSNames', 'PassthroughSupport', 'NVMLDeviceHealthCheck', 'DynamicMIG', 'ComputeDomainCliques', 'CrashOnNVLinkFabricErrors', 'DeviceMetadata', 'FabricManagerPartitioning', 'HostManagedIMEXDaemon', 'DRAListTypeAttributes', 'ConsumableShares', 'ContextualLogging', 'LoggingAlphaOptions', 'LoggingBetaOptions', 'LoggingStableOptions', 'AllAlpha', 'AllBeta'])`,message="the DRA driver v0.5.0 stops at start on a feature gate it does not know: use one of its gates (TimeSlicingSettings, MPSSupport, IMEXDaemonsWithDNSNames, PassthroughSupport, NVMLDeviceHealthCheck, DynamicMIG, ComputeDomainCliques, CrashOnNVLinkFabricErrors, DeviceMetadata, FabricManagerPartitioning, HostManagedIMEXDaemon, DRAListTypeAttributes, ConsumableShares) or a logging gate",fieldPath=".featureGates"
// +kubebuilder:validation:XValidation:rule=`!has(self.computeDomains) || (has(self.computeDomains.enabled) && !self.computeDomains.enabled) || !has(self.gpus) || !has(self.gpus.kubeletPlugin) || !has(self.gpus.kubeletPlugin.healthcheck) || !has(self.gpus.kubeletPlugin.healthcheck.port) || !has(self.computeDomains.kubeletPlugin) || !has(self.computeDomains.kubeletPlugin.healthcheck) || !has(self.computeDomains.kubeletPlugin.healthcheck.port) || self.gpus.kubeletPlugin.healthcheck.port != self.computeDomains.kubeletPlugin.healthcheck.port`,message="the two kubelet plugin containers share the pod's network: gpus and computeDomains health check ports must differ",fieldPath=".computeDomains.kubeletPlugin.healthcheck.port"
type DRADriverSpec struct {
	// Repository is the registry path of the DRA driver's image.
	// +kubebuilder:default="nvcr.io/nvidia"
	// +optional
	Repository Repository `json:"repository,omitempty"`
	// Image is the image's name.
	// +kubebuilder:default=dra-driver-nvidia-gpu
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=128
	// +kubebuilder:validation:Pattern=`^[a-zA-Z0-9\-]+$`
	// +optional
	Image ImageName `json:"image,omitempty"`
	// Version is the image's tag, or its digest written sha256:<hex>, or
	// both. The default is pinned by NVIDIA's digest of the tag
	// (gpu-operator v26.7.0's bundle).
	// +kubebuilder:default="v0.5.0@sha256:9b46984c0eb18def60e2b9817b874275f4b5b08d12d491de4f1a7b91b51d706c"
	// +kubebuilder:validation:MinLength=1
	// +optional
	Version ImageVersion `json:"version,omitempty"`
	// ImagePullPolicy is the pull policy of the driver's containers.
	// +kubebuilder:validation:Enum=Always;IfNotPresent;Never
	// +optional
	ImagePullPolicy corev1.PullPolicy `json:"imagePullPolicy,omitempty"`
	// ImagePullSecrets name the Secrets, in the operator's namespace, that
	// pull the image.
	// +kubebuilder:validation:MaxItems=16
	// +listType=atomic
	// +optional
	ImagePullSecrets []ObjectName `json:"imagePullSecrets,omitempty"`
	// FeatureGates are the DRA driver's feature gates (such as
	// NVMLDeviceHealthCheck, which publishes unhealthy GPUs as device
	// taints), passed to every container as FEATURE_GATES. Only the gates
	// of the driver v0.5.0 are accepted: it refuses to start on any other.
	// +kubebuilder:validation:MaxProperties=32
	// +optional
	FeatureGates map[string]bool `json:"featureGates,omitempty"`
	// GPUs is the kubelet plugin that publishes the node's GPUs and MIG
	// devices as ResourceSlices of driver gpu.nvidia.com.
	// +kubebuilder:default={}
	// +optional
	GPUs DRAGPUsSpec `json:"gpus,omitempty"`
	// ComputeDomains is Multi-Node NVLink: the compute-domain controller
	// and kubelet plugin, which run IMEX daemons for ComputeDomain
	// resources.
	// +kubebuilder:default={}
	// +optional
	ComputeDomains DRAComputeDomainsSpec `json:"computeDomains,omitempty"`
}

// DRAGPUsSpec is the GPU side of the DRA driver, always on.
type DRAGPUsSpec struct {
	// KubeletPlugin is the gpus container of the kubelet plugin DaemonSet.
	// +kubebuilder:default={}
	// +optional
	KubeletPlugin DRAGPUKubeletPluginSpec `json:"kubeletPlugin,omitempty"`
}

// DRAComputeDomainsSpec is the compute-domain side of the DRA driver.
type DRAComputeDomainsSpec struct {
	// Enabled runs the compute-domain controller and kubelet plugin. They
	// need driver 570.158.01 or later, Multi-Node NVLink hardware and the
	// host's nvidia-imex service off.
	// +kubebuilder:default=true
	// +optional
	Enabled *bool `json:"enabled,omitempty"`
	// Controller is the compute-domain controller Deployment.
	// +kubebuilder:default={}
	// +optional
	Controller DRAContainerSpec `json:"controller,omitempty"`
	// KubeletPlugin is the compute-domains container of the kubelet plugin
	// DaemonSet.
	// +kubebuilder:default={}
	// +optional
	KubeletPlugin DRAComputeDomainKubeletPluginSpec `json:"kubeletPlugin,omitempty"`
}

// DRAContainerSpec is what a person may add to one of the DRA driver's
// containers.
type DRAContainerSpec struct {
	// Env is added to the container's environment, after the operator's.
	// +kubebuilder:validation:MaxItems=64
	// +listType=map
	// +listMapKey=name
	// +optional
	Env []EnvVar `json:"env,omitempty"`
	// Resources are the container's requests and limits.
	// +optional
	Resources *ResourceRequirements `json:"resources,omitempty"`
}

// DRAGPUKubeletPluginSpec is the gpus container of the kubelet plugin.
type DRAGPUKubeletPluginSpec struct {
	DRAContainerSpec `json:",inline"`
	// Healthcheck is the container's gRPC health endpoint, which its
	// startup and liveness probes call.
	// +kubebuilder:default={}
	// +optional
	Healthcheck DRAGPUHealthcheckSpec `json:"healthcheck,omitempty"`
}

// DRAComputeDomainKubeletPluginSpec is the compute-domains container of
// the kubelet plugin.
type DRAComputeDomainKubeletPluginSpec struct {
	DRAContainerSpec `json:",inline"`
	// Healthcheck is the container's gRPC health endpoint, which its
	// startup and liveness probes call.
	// +kubebuilder:default={}
	// +optional
	Healthcheck DRAComputeDomainHealthcheckSpec `json:"healthcheck,omitempty"`
}

// The two plugins' health checks differ only in their default ports
// (NVIDIA's, gpu-operator v26.7.0 internal/state/dra_driver.go L41-45): a
// default must sit on the leaf field, since a struct is always sent, so
// each port has a type of its own.

// DRAGPUHealthcheckSpec is the GPU plugin's gRPC health endpoint.
type DRAGPUHealthcheckSpec struct {
	// Enabled serves the endpoint and probes it; off, the container has
	// no probes and the kubelet cannot restart a plugin that stopped
	// answering.
	// +kubebuilder:default=true
	// +optional
	Enabled *bool `json:"enabled,omitempty"`
	// Port is the pod's port the endpoint listens on and the probes call:
	// not 8080 or 8081, where the two containers serve metrics.
	// +kubebuilder:default=51516
	// +kubebuilder:validation:XValidation:rule=`self != 8080 && self != 8081`,message="8080 and 8081 serve the kubelet plugin's metrics: choose another port"
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=65535
	// +optional
	Port *int32 `json:"port,omitempty"`
}

// DRAComputeDomainHealthcheckSpec is the compute-domain plugin's gRPC
// health endpoint.
type DRAComputeDomainHealthcheckSpec struct {
	// Enabled serves the endpoint and probes it.
	// +kubebuilder:default=true
	// +optional
	Enabled *bool `json:"enabled,omitempty"`
	// Port is the pod's port the endpoint listens on and the probes call:
	// not 8080 or 8081, where the two containers serve metrics.
	// +kubebuilder:default=51515
	// +kubebuilder:validation:XValidation:rule=`self != 8080 && self != 8081`,message="8080 and 8081 serve the kubelet plugin's metrics: choose another port"
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=65535
	// +optional
	Port *int32 `json:"port,omitempty"`
}

// The plugins' health ports when none is set, NVIDIA's (gpu-operator
// v26.7.0, internal/state/dra_driver.go L41-45): a spec the API server did
// not default, such as a GPUCluster's draDriver, probes them too.
const (
	DefaultGPUHealthcheckPort           int32 = 51516
	DefaultComputeDomainHealthcheckPort int32 = 51515
)

// ProbePort returns the port the plugin's probes call, and false when the
// health check is off.
func (h DRAGPUHealthcheckSpec) ProbePort() (int32, bool) {
	return probePort(h.Enabled, h.Port, DefaultGPUHealthcheckPort)
}

// ProbePort returns the port the plugin's probes call, and false when the
// health check is off.
func (h DRAComputeDomainHealthcheckSpec) ProbePort() (int32, bool) {
	return probePort(h.Enabled, h.Port, DefaultComputeDomainHealthcheckPort)
}

func probePort(enabled *bool, port *int32, fallback int32) (int32, bool) {
	if enabled != nil && !*enabled {
		return 0, false
	}
	if port == nil {
		return fallback, true
	}
	return *port, true
}

// ComputeDomainsEnabled reports whether the compute-domain side runs. A
// spec the API server has not defaulted (nil) counts as on, as the CRD's
// default says.
func (d *DRADriverSpec) ComputeDomainsEnabled() bool {
	return d.ComputeDomains.Enabled == nil || *d.ComputeDomains.Enabled
}

// FeatureGate reports whether the named driver feature gate is set on.
func (d *DRADriverSpec) FeatureGate(name string) bool { return d.FeatureGates[name] }

// DynamicMIG reports whether the driver creates MIG devices for claims
// itself: its DynamicMIG gate, an alpha gate that AllAlpha turns on
// unless it is set off (kubernetes-sigs/dra-driver-nvidia-gpu 95932046,
// pkg/featuregates/featuregates.go).
func (d *DRADriverSpec) DynamicMIG() bool {
	if on, set := d.FeatureGates["DynamicMIG"]; set {
		return on
	}
	return d.FeatureGates["AllAlpha"]
}
