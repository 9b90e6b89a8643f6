package v1

import metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

// PolicyState is the one-word summary of a ClusterPolicy.
// +kubebuilder:validation:Enum=ready;notReady;ignored
type PolicyState string

// Values of status.state.
const (
	// PolicyReady: every GPU node is ready on every enabled state.
	PolicyReady PolicyState = "ready"
	// PolicyNotReady: some GPU node is still on its way, or failed.
	PolicyNotReady PolicyState = "notReady"
	// PolicyIgnored: an older ClusterPolicy is the one acted on.
	PolicyIgnored PolicyState = "ignored"
)

// ClusterPolicyStatus is what the operator observed when it last acted on
// the policy.
type ClusterPolicyStatus struct {
	// State is ready, notReady or ignored.
	// +optional
	State PolicyState `json:"state,omitempty"`

	// Namespace is where the operator runs and deploys its operands.
	// +optional
	Namespace string `json:"namespace,omitempty"`

	// ObservedGeneration is the generation this status describes.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`

	// ReadyNodes is "ready/total": GPU nodes ready on every enabled state,
	// out of all GPU nodes.
	// +optional
	ReadyNodes string `json:"readyNodes,omitempty"`

	// Conditions are Ready, Progressing and Degraded.
	// +listType=map
	// +listMapKey=type
	// +optional
	Conditions []metav1.Condition `json:"conditions,omitempty"`

	// States summarises each state across the GPU nodes.
	// +listType=map
	// +listMapKey=name
	// +optional
	States []StateSummary `json:"states,omitempty"`

	// GPUHealth counts the GPU nodes whose device plugin reports unhealthy
	// GPUs; absent while there are none.
	// +optional
	GPUHealth *GPUHealthSummary `json:"gpuHealth,omitempty"`

	// IgnoredFields lists the fields set in the spec that this operator
	// accepts, so that NVIDIA's objects apply unchanged, and refuses to act
	// on, each with why: "spec.validator: no validator pods run: ...".
	// +listType=atomic
	// +optional
	IgnoredFields []string `json:"ignoredFields,omitempty"`
}

// GPUHealthSummary counts the unhealthy GPUs across the GPU nodes: GPUs
// their device plugin registers but takes out of the node's allocatable.
type GPUHealthSummary struct {
	// UnhealthyNodes is how many GPU nodes have unhealthy GPUs.
	UnhealthyNodes int32 `json:"unhealthyNodes"`
	// UnhealthyGPUs is how many GPUs are unhealthy on them.
	UnhealthyGPUs int32 `json:"unhealthyGPUs"`
	// Message names the first of those nodes, with their count.
	// +kubebuilder:validation:MaxLength=4096
	// +optional
	Message string `json:"message,omitempty"`
}

// StateSummary counts the GPU nodes of one state.
type StateSummary struct {
	// Name of the state, such as driver.
	Name string `json:"name"`
	// Desired is how many GPU nodes should run the state.
	Desired int32 `json:"desired"`
	// Ready is how many of them have it ready.
	Ready int32 `json:"ready"`
	// Failed is how many of them have it failed.
	Failed int32 `json:"failed"`
	// Disabled is how many GPU nodes do not run the state: disabled in the
	// policy, opted out on the node, or, for the driver, using the host's
	// driver.
	// +optional
	Disabled int32 `json:"disabled,omitempty"`
	// Message says what a person should know about the state across the
	// nodes, such as which nodes use the driver installed on their host.
	// +kubebuilder:validation:MaxLength=4096
	// +optional
	Message string `json:"message,omitempty"`
}

// Condition types of a ClusterPolicy.
const (
	// ConditionReady is true when every GPU node is ready on every state.
	ConditionReady = "Ready"
	// ConditionProgressing is true while nodes are on their way to ready,
	// including during a driver upgrade.
	ConditionProgressing = "Progressing"
	// ConditionDegraded is true when some node failed a state, or the
	// operator could not apply what the policy asks for.
	ConditionDegraded = "Degraded"
)

// Condition reasons of a ClusterPolicy. Reasons name the state concerned;
// messages name the nodes.
const (
	ReasonAllStatesReady  = "AllStatesReady"
	ReasonStateNotReady   = "StateNotReady"
	ReasonStateFailed     = "StateFailed"
	ReasonRolloutComplete = "RolloutComplete"
	ReasonRollingOut      = "RollingOut"
	// ReasonDriverUpgrade: nodes are moving to a new driver.
	ReasonDriverUpgrade = "DriverUpgrade"
	// ReasonMaintenanceWaiting: a driver upgrade, a MIG reconfiguration
	// or a repair waits to start on nodes, for its budget or for another
	// operation holding the node; the message says which and why.
	ReasonMaintenanceWaiting = "MaintenanceWaiting"
	ReasonNoFailures         = "NoFailures"
	ReasonApplyFailed        = "ApplyFailed"
	// ReasonUpgradeFailed: a driver upgrade failed on some node, which stays
	// cordoned until a person looks at it.
	ReasonUpgradeFailed = "UpgradeFailed"
	// ReasonPrerequisiteMissing: the policy asks for something the cluster
	// lacks, such as a ServiceMonitor without the Prometheus Operator.
	ReasonPrerequisiteMissing = "PrerequisiteMissing"
	ReasonIgnored             = "Ignored"
)
