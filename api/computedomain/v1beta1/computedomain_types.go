package v1beta1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// The readiness a ComputeDomain, and each of its nodes, reports.
const (
	StatusReady    = "Ready"
	StatusNotReady = "NotReady"
)

// How many IMEX channels a workload's claim on a ComputeDomain's channel gets.
const (
	ChannelAllocationModeSingle = "Single"
	ChannelAllocationModeAll    = "All"
)

// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:scope=Namespaced

// ComputeDomain is a group of nodes joined by Multi-Node NVLink for one
// multi-node workload: the DRA driver runs an IMEX daemon on each node a
// workload pod of the domain lands on, and hands the pods IMEX channels
// through a ResourceClaimTemplate it creates.
type ComputeDomain struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec ComputeDomainSpec `json:"spec,omitempty"`
	// Status is the driver's view of the domain, for people debugging it;
	// a workload should not wait on it.
	Status ComputeDomainStatus `json:"status,omitempty"`
}

// +kubebuilder:object:root=true

// ComputeDomainList is a list of ComputeDomains.
type ComputeDomainList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`

	Items []ComputeDomain `json:"items"`
}

func init() {
	SchemeBuilder.Register(&ComputeDomain{}, &ComputeDomainList{})
}

// ComputeDomainSpec is what a user asks of a ComputeDomain; it cannot be
// changed once created.
//
// +kubebuilder:validation:XValidation:rule="self == oldSelf", message="A computeDomain.spec is immutable"
type ComputeDomainSpec struct {
	// NumNodes is how many nodes (IMEX daemons) the domain is expected to
	// span. Where the driver names IMEX daemons by DNS (its default), 0 is
	// the usual value and a non-zero count only decides when the status
	// turns Ready; workloads start as soon as their own node's daemon runs.
	// Otherwise workload pods wait until this many daemons have joined.
	// Deprecated upstream, to go in the next API version. Optional, 0 by
	// default, from the driver at 95932046 (v0.5.0); NVIDIA's v26.7.0
	// chart still ships the older CRD that requires it.
	// +kubebuilder:default:=0
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Optional
	NumNodes int `json:"numNodes,omitempty"`
	// Channel describes the ResourceClaimTemplate workload pods use to get
	// IMEX channels of this domain.
	Channel *ComputeDomainChannelSpec `json:"channel"`
}

// ComputeDomainChannelSpec describes how workload pods claim IMEX channels
// of a ComputeDomain.
type ComputeDomainChannelSpec struct {
	// ResourceClaimTemplate is the template the driver creates, in the
	// domain's namespace, for workload pods to reference.
	ResourceClaimTemplate ComputeDomainResourceClaimTemplate `json:"resourceClaimTemplate"`
	// AllocationMode is Single for one IMEX channel per claim, or All for
	// every channel the IMEX domain has.
	// +kubebuilder:validation:Enum=All;Single
	// +kubebuilder:default:=Single
	// +kubebuilder:validation:Optional
	AllocationMode string `json:"allocationMode,omitempty"`
}

// ComputeDomainResourceClaimTemplate names the ResourceClaimTemplate the
// driver creates for a ComputeDomain.
type ComputeDomainResourceClaimTemplate struct {
	Name string `json:"name"`
}

// ComputeDomainStatus is the driver's report on a ComputeDomain.
type ComputeDomainStatus struct {
	// Status is Ready once the expected IMEX daemons are ready.
	// +kubebuilder:validation:Enum=Ready;NotReady
	// +kubebuilder:default=NotReady
	Status string `json:"status"`
	// Nodes are the nodes whose IMEX daemons have joined the domain.
	// +listType=map
	// +listMapKey=name
	Nodes []ComputeDomainNode `json:"nodes,omitempty"`
}

// ComputeDomainNode is one node of a ComputeDomain, with its IMEX daemon.
type ComputeDomainNode struct {
	Name      string `json:"name"`
	IPAddress string `json:"ipAddress"`
	CliqueID  string `json:"cliqueID"`
	// Index numbers the node within its clique, so that every node maps
	// the same IP address to the same DNS name: (cliqueID, index) is
	// unique. Optional, though not omitted when 0, so that a downgraded
	// driver still reads it.
	// +kubebuilder:validation:Optional
	Index int `json:"index"`
	// Status is Ready while the node's IMEX daemon can broker GPU memory
	// exchanges. Optional, for downgrades.
	// +kubebuilder:validation:Optional
	// +kubebuilder:validation:Enum=Ready;NotReady
	// +kubebuilder:default:=NotReady
	Status string `json:"status,omitempty"`
}
