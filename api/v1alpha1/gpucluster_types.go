package v1alpha1

import (
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	gpuv1 "github.com/gpu-operator/gpu-operator/api/v1"
)

// GPUClusterName is the one name a GPUCluster may have: it is a
// singleton, as at NVIDIA.
const GPUClusterName = "gpu-cluster"

// NVIDIAGPUClusterFinalizer is the finalizer NVIDIA's operator puts on a
// GPUCluster. This operator never sets or removes it; one left behind
// (NVIDIA's operator gone without its cleanup) holds a deletion, and the
// status says how to lift it.
const NVIDIAGPUClusterFinalizer = "gpucluster.nvidia.com/dra-resourceclaim"

// GPUCluster is NVIDIA's resource for a cluster that serves its GPUs
// through Dynamic Resource Allocation. NVIDIA's operator runs it instead
// of a ClusterPolicy, never beside one. Here it lies over the active
// ClusterPolicy: while it exists every driver pool is in allocation mode
// dra, and the DRA driver runs with its draDriver settings. Deleting it
// moves the pools back to their own modes, node by node within their
// budgets.
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:scope=Cluster,shortName=gc
// +kubebuilder:printcolumn:name="Status",type=string,JSONPath=`.status.state`,description="ready, notReady or disabled"
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=`.status.readyNodes`,description="GPU nodes serving through DRA / GPU nodes"
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
// +kubebuilder:validation:XValidation:rule="self.metadata.name == 'gpu-cluster'",message="GPUCluster is a singleton, metadata.name must be 'gpu-cluster'"
type GPUCluster struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// Spec is required: without its draDriver, whose defaults name the
	// driver's image, the DRA driver would have no image to run.
	// +required
	Spec   GPUClusterSpec   `json:"spec"`
	Status GPUClusterStatus `json:"status,omitempty"`
}

// GPUClusterList is a list of GPUClusters.
// +kubebuilder:object:root=true
type GPUClusterList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []GPUCluster `json:"items"`
}

// GPUClusterSpec has NVIDIA's field names. Only draDriver is acted on;
// the other sections are accepted so that NVIDIA's objects apply
// unchanged, and the ClusterPolicy's own sections govern what they would
// set (status.ignoredFields lists the ones set).
type GPUClusterSpec struct {
	// DRADriver is NVIDIA's DRA driver, as the ClusterPolicy's draDriver;
	// while the GPUCluster exists it is the one the nodes run.
	DRADriver gpuv1.DRADriverSpec `json:"draDriver"`
	// DCGM is accepted for compatibility and not acted on: the
	// ClusterPolicy's dcgmExporter runs its own host engine.
	// +optional
	DCGM *apiextensionsv1.JSON `json:"dcgm,omitempty" refused:"the ClusterPolicy's dcgm governs"`
	// DCGMExporter is accepted for compatibility and not acted on: the
	// ClusterPolicy's dcgmExporter governs.
	// +optional
	DCGMExporter *apiextensionsv1.JSON `json:"dcgmExporter,omitempty" refused:"the ClusterPolicy's dcgmExporter governs"`
	// HostPaths is accepted for compatibility and not acted on: the
	// ClusterPolicy's hostPaths govern.
	// +optional
	HostPaths *apiextensionsv1.JSON `json:"hostPaths,omitempty" refused:"the ClusterPolicy's hostPaths govern"`
	// Daemonsets is accepted for compatibility and not acted on: the
	// ClusterPolicy's daemonsets govern.
	// +optional
	Daemonsets *apiextensionsv1.JSON `json:"daemonsets,omitempty" refused:"the ClusterPolicy's daemonsets govern"`
}

// IgnoredFields returns the JSON paths of the sections that are set and
// not acted on.
func (s *GPUClusterSpec) IgnoredFields() []string { return gpuv1.OpaqueFields(s, "spec") }

// RefusedFields returns "<path>: <why>" for each field IgnoredFields
// lists: what status.ignoredFields holds.
func (s *GPUClusterSpec) RefusedFields() []string { return gpuv1.Refusals(s, "spec") }

// GPUCluster condition reasons, NVIDIA's (the Ready and Error condition
// types are the NVIDIADriver's, and NVIDIA's too).
const (
	// ReasonPrerequisiteNotMet: no ClusterPolicy to lie over.
	ReasonPrerequisiteNotMet = "PrerequisiteNotMet"
	// ReasonOperandNotReady: some GPU node does not serve through DRA yet.
	ReasonOperandNotReady = "OperandNotReady"
	// ReasonReconciled: every GPU node serves through DRA.
	ReasonReconciled = "Reconciled"
	// ReasonReconcileFailed: the operator cannot run the DRA driver here
	// (the API server does not serve DRA, or CDI is off).
	ReasonReconcileFailed = "ReconcileFailed"
	// ReasonDeletionHeld: the GPUCluster is being deleted, and NVIDIA's
	// operator's finalizer, which nothing here removes, holds it.
	ReasonDeletionHeld = "DeletionHeld"
)

// GPUClusterStatus is what the operator observed of the GPUCluster.
type GPUClusterStatus struct {
	// State is ready, notReady or disabled.
	// +kubebuilder:validation:Enum=ready;notReady;disabled
	// +optional
	State State `json:"state,omitempty"`
	// Namespace is where the DRA driver runs: the operator's namespace.
	// +optional
	Namespace string `json:"namespace,omitempty"`
	// ObservedGeneration is the spec generation the status describes.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`
	// ReadyNodes reads "serving/total": the GPU nodes in allocation mode
	// dra whose DRA driver is ready, of every GPU node.
	// +optional
	ReadyNodes string `json:"readyNodes,omitempty"`
	// IgnoredFields lists the fields set in the spec that this operator
	// accepts, so that NVIDIA's objects apply unchanged, and refuses to act
	// on, each with why: "spec.validator: no validator pods run: ...".
	// +kubebuilder:validation:MaxItems=16
	// +listType=atomic
	// +optional
	IgnoredFields []string `json:"ignoredFields,omitempty"`
	// Conditions are Ready and Error.
	// +listType=map
	// +listMapKey=type
	// +kubebuilder:validation:MaxItems=8
	// +optional
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

func init() {
	SchemeBuilder.Register(&GPUCluster{}, &GPUClusterList{})
}
