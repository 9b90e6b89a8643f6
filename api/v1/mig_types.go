package v1

import "k8s.io/apimachinery/pkg/util/intstr"

// MIGStrategy is how the device plugin and GFD expose MIG devices.
// +kubebuilder:validation:Enum=single;mixed
type MIGStrategy string

// MIG strategies, as the NVIDIA device plugin names them.
const (
	// MIGStrategySingle exposes the MIG devices of a node, all of one
	// profile, as nvidia.com/gpu.
	MIGStrategySingle MIGStrategy = "single"
	// MIGStrategyMixed exposes each profile as its own resource,
	// nvidia.com/mig-<profile>, and whole GPUs as nvidia.com/gpu.
	MIGStrategyMixed MIGStrategy = "mixed"
)

// MIGSpec is how MIG devices are exposed.
type MIGSpec struct {
	// Strategy is how the device plugin and GFD expose MIG devices:
	// single (every GPU of a node partitioned alike, its MIG devices
	// advertised as nvidia.com/gpu) or mixed (nvidia.com/mig-<profile>).
	// +kubebuilder:default=single
	// +optional
	Strategy MIGStrategy `json:"strategy,omitempty"`
}

// StrategyOrDefault is Strategy, or single when unset.
func (s *MIGSpec) StrategyOrDefault() MIGStrategy {
	if s.Strategy == "" {
		return MIGStrategySingle
	}
	return s.Strategy
}

// MIGManagerSpec is NVIDIA's mig-manager, which partitions a node's GPUs
// into MIG devices. The operator runs it on a node only while it applies
// the node's configuration, after taking the node's GPU pods and the
// device plugin, GFD and dcgm-exporter off it: a node's reconfiguration
// is a state machine on the node label nvidia.com/gpu-mig-reconfigure-state,
// within a budget, as a driver upgrade is.
// +kubebuilder:validation:XValidation:rule=`(has(self.enabled) && !self.enabled) || ((!has(self.image) || size(self.image) > 0) && (!has(self.version) || size(self.version) > 0))`,message="image and version must be set while enabled is true"
type MIGManagerSpec struct {
	// Enabled makes the operator manage MIG. Off by default, unlike the
	// other operands: turning it on reconfigures MIG-capable nodes to
	// config.default, evicting their GPU pods, within maxParallel. Turning
	// it off stops every reconfiguration where it stands and leaves the
	// GPUs as they are.
	// +kubebuilder:default=false
	// +optional
	Enabled *bool `json:"enabled,omitempty"`

	ContainerSettings `json:",inline"`

	// Repository is the registry path of the mig-manager image.
	// +kubebuilder:default="nvcr.io/nvidia/cloud-native"
	// +optional
	Repository Repository `json:"repository,omitempty"`
	// Image is the mig-manager image name.
	// +kubebuilder:default=k8s-mig-manager
	// +optional
	Image ImageName `json:"image,omitempty"`
	// Version is the mig-manager image tag or digest. The default is pinned
	// by NVIDIA's digest of the tag (gpu-operator v26.7.0's bundle).
	// +kubebuilder:default="v0.15.0@sha256:cab2cf9deafc9602da69d0832a82958a7687f22f4a2f19674099dc9a5c4ea8e2"
	// +optional
	Version ImageVersion `json:"version,omitempty"`

	// Config names the ConfigMap of MIG configurations (mig-parted's
	// config.yaml) and the configuration of nodes that name none.
	// +kubebuilder:default={}
	// +optional
	Config MIGManagerConfig `json:"config,omitempty"`

	// GPUClientsConfig names a ConfigMap whose clients.yaml lists the
	// host's systemd services that use the GPUs, which mig-manager stops
	// while it applies a configuration.
	// +optional
	GPUClientsConfig *GPUClientsConfig `json:"gpuClientsConfig,omitempty"`

	// MaxParallel is how many GPU nodes MIG reconfigurations may hold out
	// of service at once (tainted nvidia.com/gpu.mig-reconfiguring, or
	// failed): a count, or a percentage of the GPU nodes rounded up. It is
	// the reconfigurations' own share: nodes other operations hold do not
	// take its places, so they go on during a driver rollout. Nodes that serve no GPUs (a
	// new node) start without waiting for it. (Its length is bounded so that the
	// CRD's validation rules stay within the API server's cost budget.)
	// +kubebuilder:default=1
	// +kubebuilder:validation:XIntOrString
	// +kubebuilder:validation:MaxLength=10
	// +kubebuilder:validation:XValidation:rule=`type(self) == int ? self >= 1 : self.matches('^([1-9][0-9]{0,8}|(100|[1-9][0-9]?)%)$')`,message="must be a count of at least 1 or a percentage from 1% to 100%"
	// +optional
	MaxParallel *intstr.IntOrString `json:"maxParallel,omitempty"`

	// EvictionTimeoutSeconds bounds the eviction of a node's GPU pods
	// (through the Eviction API, which honours PodDisruptionBudgets); a
	// node with GPU pods left after it fails its reconfiguration.
	// +kubebuilder:default=300
	// +kubebuilder:validation:Minimum=30
	// +optional
	EvictionTimeoutSeconds *int32 `json:"evictionTimeoutSeconds,omitempty"`

	// ApplyTimeoutSeconds bounds each attempt of mig-manager to apply a
	// configuration, a reboot it asks for included: an attempt that has
	// not succeeded by then is retried with a new mig-manager pod, up to
	// three attempts, and the node's reconfiguration then fails. The
	// operator gives each attempt at least its --mig-apply-timeout-floor
	// (60 seconds by default): mig-parted stops the GPU clients and walks
	// every GPU.
	// +kubebuilder:default=600
	// +kubebuilder:validation:Minimum=1
	// +optional
	ApplyTimeoutSeconds *int32 `json:"applyTimeoutSeconds,omitempty"`

	// ValidationTimeoutSeconds bounds the wait, after an apply, for the
	// device plugin to advertise the configuration's MIG devices.
	// +kubebuilder:default=600
	// +kubebuilder:validation:Minimum=60
	// +optional
	ValidationTimeoutSeconds *int32 `json:"validationTimeoutSeconds,omitempty"`
}

// MIGManagerConfig names the ConfigMap of MIG configurations.
type MIGManagerConfig struct {
	// Name of a ConfigMap in the operator namespace with a config.yaml in
	// mig-parted's format. Empty, or default-mig-parted-config, means the
	// operator's own, which it writes (as NVIDIA's operator does): MIG
	// disabled or enabled without devices on every GPU, and each profile
	// alone on every GPU of an H100 80GB or H200 141GB (all-1g.18gb, ...).
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:XValidation:rule=`size(self) == 0 || self.matches('^[a-z0-9]([-a-z0-9]*[a-z0-9])?([.][a-z0-9]([-a-z0-9]*[a-z0-9])?)*$')`,message="must be empty or a lower case DNS subdomain: letters a-z, digits, '-' and '.', starting and ending with a letter or digit"
	// +optional
	Name string `json:"name,omitempty"`
	// Default is the configuration of MIG-capable nodes (GFD's
	// nvidia.com/mig.capable=true) without the nvidia.com/mig.config label
	// in no driver pool with a migConfig; empty leaves them alone.
	// +kubebuilder:default=all-disabled
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:XValidation:rule=`size(self) == 0 || self.matches('^[a-zA-Z0-9]([-._a-zA-Z0-9]*[a-zA-Z0-9])?$')`,message="must be a label value: at most 63 letters, digits, '-', '_' or '.', starting and ending with a letter or digit"
	// +optional
	Default string `json:"default,omitempty"`
}

// GPUClientsConfig names the ConfigMap of the host's GPU clients.
type GPUClientsConfig struct {
	// Name of a ConfigMap in the operator namespace with a clients.yaml.
	// Empty, or default-gpu-clients, means the operator's own, which it
	// writes with NVIDIA's list (nvsm, dcgm, nv_peer_mem).
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:XValidation:rule=`size(self) == 0 || self.matches('^[a-z0-9]([-a-z0-9]*[a-z0-9])?([.][a-z0-9]([-a-z0-9]*[a-z0-9])?)*$')`,message="must be empty or a lower case DNS subdomain: letters a-z, digits, '-' and '.', starting and ending with a letter or digit"
	// +optional
	Name string `json:"name,omitempty"`
}

// DefaultMIGConfigMap is the ConfigMap of MIG configurations the operator
// writes when migManager.config.name is empty.
const DefaultMIGConfigMap = "default-mig-parted-config"

// DefaultGPUClientsConfigMap is the ConfigMap of the host's GPU clients the
// operator writes when migManager.gpuClientsConfig.name is empty.
const DefaultGPUClientsConfigMap = "default-gpu-clients"

// GPUClientsConfigMapName is the ConfigMap of the host's GPU clients in use.
func (s *MIGManagerSpec) GPUClientsConfigMapName() string {
	if s.GPUClientsConfig == nil || s.GPUClientsConfig.Name == "" {
		return DefaultGPUClientsConfigMap
	}
	return s.GPUClientsConfig.Name
}

// MIG manager defaults, for a policy stored before the fields existed.
const (
	defaultMIGApplyTimeoutSeconds      = 600
	defaultMIGValidationTimeoutSeconds = 600
)

// Manages reports whether the operator manages MIG: migManager is
// enabled. It is off unless set, unlike the other operands: enabling it
// reconfigures MIG-capable nodes to config.default.
func (s *MIGManagerSpec) Manages() bool { return s.Enabled != nil && *s.Enabled }

// OwnConfigMap reports whether the ConfigMap of MIG configurations is the
// operator's to write.
func (s *MIGManagerSpec) OwnConfigMap() bool { return s.ConfigMapName() == DefaultMIGConfigMap }

// OwnGPUClientsConfigMap reports whether the ConfigMap of the host's GPU
// clients is the operator's to write.
func (s *MIGManagerSpec) OwnGPUClientsConfigMap() bool {
	return s.GPUClientsConfigMapName() == DefaultGPUClientsConfigMap
}

// ConfigMapName is the ConfigMap of MIG configurations in use.
func (s *MIGManagerSpec) ConfigMapName() string {
	if s.Config.Name == "" {
		return DefaultMIGConfigMap
	}
	return s.Config.Name
}

// MaxParallelOrDefault is MaxParallel, or 1 when unset.
func (s *MIGManagerSpec) MaxParallelOrDefault() intstr.IntOrString {
	if s.MaxParallel == nil {
		return intstr.FromInt32(1)
	}
	return *s.MaxParallel
}

// EvictionTimeout is EvictionTimeoutSeconds, or its default when unset.
func (s *MIGManagerSpec) EvictionTimeout() int32 {
	if s.EvictionTimeoutSeconds == nil {
		return defaultEvictionTimeoutSeconds
	}
	return *s.EvictionTimeoutSeconds
}

// ApplyTimeout is ApplyTimeoutSeconds, or its default when unset.
func (s *MIGManagerSpec) ApplyTimeout() int32 {
	if s.ApplyTimeoutSeconds == nil {
		return defaultMIGApplyTimeoutSeconds
	}
	return *s.ApplyTimeoutSeconds
}

// ValidationTimeout is ValidationTimeoutSeconds, or its default when unset.
func (s *MIGManagerSpec) ValidationTimeout() int32 {
	if s.ValidationTimeoutSeconds == nil {
		return defaultMIGValidationTimeoutSeconds
	}
	return *s.ValidationTimeoutSeconds
}

// The MIG contract (spec.migManager).
const (
	// LabelMIGConfig names the node's MIG configuration, a key of
	// migManager.config's file: NVIDIA's label, which mig-manager reads.
	// Set by a person, it wins over the node's pool and the default; the
	// operator writes it where a person did not (see
	// AnnotationMIGConfigWritten).
	LabelMIGConfig = "nvidia.com/mig.config"
	// LabelMIGConfigState is mig-manager's word on its last apply:
	// pending, rebooting, success or failed.
	LabelMIGConfigState = "nvidia.com/mig.config.state"
	// LabelMIGCapable is GFD's label of a node whose GPUs support MIG.
	LabelMIGCapable = "nvidia.com/mig.capable"
	// AnnotationMIGConfigWritten is the value the operator last wrote to
	// LabelMIGConfig: a label that differs from it was set by a person,
	// and the operator leaves it alone.
	AnnotationMIGConfigWritten = OperatorAnnotationPrefix + "mig-config"

	// LabelMIGReconfigureState is where the node stands in the
	// reconfiguration of its MIG devices; its value is a
	// MIGReconfigureState.
	LabelMIGReconfigureState = "nvidia.com/gpu-mig-reconfigure-state"
	// MIGReconfigureAnnotationPrefix starts the annotations the
	// reconfiguration keeps on nodes.
	MIGReconfigureAnnotationPrefix = "nvidia.com/gpu-mig-reconfigure."
	// AnnotationMIGApplied is the configuration applied on the node, as
	// far as the operator knows: absent until its first apply.
	AnnotationMIGApplied = MIGReconfigureAnnotationPrefix + "applied"
	// AnnotationMIGAppliedUnder is "<boot ID>/<driver pod UID>": the boot
	// and the driver the applied configuration's MIG devices were created
	// under; absent when it has none (whole GPUs, MIG mode alone). MIG
	// mode survives a reboot and a driver reload, MIG devices do not
	// (mig-parted v0.15.0 README; NVIDIA's driver manager restarts
	// mig-manager across a reload for this reason): another boot or
	// driver pod means they are gone, and the operator applies the
	// configuration again before the device plugin starts.
	AnnotationMIGAppliedUnder = MIGReconfigureAnnotationPrefix + "applied-under"
	// MIGAppliedUnderDynamicMIG is AnnotationMIGAppliedUnder's value once
	// the DRA driver's DynamicMIG has served the node: it makes and
	// destroys MIG devices itself, so nothing of the applied
	// configuration is known to be there. No boot and driver is it: the
	// configuration is applied again before the device plugin, or a DRA
	// driver without DynamicMIG, serves the node again.
	MIGAppliedUnderDynamicMIG = "dra-dynamic-mig"
	// AnnotationMIGReason says why the node's reconfiguration failed.
	AnnotationMIGReason = MIGReconfigureAnnotationPrefix + "reason"
	// AnnotationMIGRefused says why the node's configuration cannot be
	// applied; absent when it can.
	AnnotationMIGRefused = MIGReconfigureAnnotationPrefix + "refused"
	// DeployPausedForMIG is the value mig-manager v0.15 gives the GPU
	// clients' deploy labels while it applies a configuration, and puts
	// back to "true" when it reports a state (mig-parted v0.15.0,
	// pkg/mig/reconfigure/reconfigure.go: maybeSetPaused, setState), and
	// leaves there when it gives up waiting for the clients' pods, with no
	// state reported. The operator takes it for "true": its own gates hold
	// the clients off during an apply, and a mig-manager killed or stopped
	// mid-apply must not leave them off for good.
	DeployPausedForMIG = "paused-for-mig-change"
	// TaintMIGReconfiguring is the key of the NoSchedule taint the
	// operator keeps on a node from the eviction of its GPU pods until
	// its new MIG devices are advertised. Its value is
	// TaintGPUNotReadyValue, the operator's.
	TaintMIGReconfiguring = "nvidia.com/gpu.mig-reconfiguring"
)

// MIG config states, as mig-manager writes them.
const (
	MIGConfigPending   = "pending"
	MIGConfigRebooting = "rebooting"
	MIGConfigSuccess   = "success"
	MIGConfigFailed    = "failed"
)

// MIGReconfigureState is a step of a node's MIG reconfiguration.
type MIGReconfigureState string

// The steps of a reconfiguration, in order.
const (
	// MIGReconfigureRequired: the node's configuration differs from the
	// one applied; it waits for the budget.
	MIGReconfigureRequired MIGReconfigureState = "reconfigure-required"
	// MIGEviction: the node is tainted and its GPU pods evicted.
	MIGEviction MIGReconfigureState = "eviction-required"
	// MIGClientsOff: the device plugin, GFD and dcgm-exporter leave the
	// node (its mig-manager state is pending).
	MIGClientsOff MIGReconfigureState = "clients-off-required"
	// MIGApply: mig-manager runs on the node and applies the
	// configuration; a failed or late attempt is retried.
	MIGApply MIGReconfigureState = "apply-required"
	// MIGValidation: the GPU stack comes back; waiting for the device
	// plugin to advertise the new MIG devices.
	MIGValidation MIGReconfigureState = "validation-required"
	// MIGReconfigureDone: the configuration is applied and advertised,
	// the taint gone.
	MIGReconfigureDone MIGReconfigureState = "reconfigure-done"
	// MIGReconfigureFailed: the reconfiguration could not go on; the node
	// keeps its taint, and its GPU stack stays off, until its
	// configuration changes or a person removes this label.
	MIGReconfigureFailed MIGReconfigureState = "reconfigure-failed"
)
