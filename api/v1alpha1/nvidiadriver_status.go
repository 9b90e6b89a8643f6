package v1alpha1

import metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

// State is where an NVIDIADriver stands, with NVIDIA's values.
type State string

// States.
const (
	// StateReady: every node of the pool runs this driver, ready.
	StateReady State = "ready"
	// StateNotReady: some node of the pool does not, or the resource
	// conflicts with another.
	StateNotReady State = "notReady"
	// StateDisabled: the operator does not act on NVIDIADrivers (no
	// ClusterPolicy, driver.useNvidiaDriverCRD unset, or driver.enabled
	// false), or not on this driver type.
	StateDisabled State = "disabled"
)

// Condition types, NVIDIA's.
const (
	// ConditionReady is True when the state is ready.
	ConditionReady = "Ready"
	// ConditionError is True when something the user must fix holds the
	// pool back: a conflict, a driver type not run.
	ConditionError = "Error"
)

// Condition reasons.
const (
	ReasonReady                     = "Ready"
	ReasonNodesNotReady             = "DriverNotReady"
	ReasonConflictingNodeSelector   = "ConflictingNodeSelector"
	ReasonMultipleDefaults          = "MultipleDefaultNVIDIADrivers"
	ReasonUnsupportedDriverType     = "UnsupportedDriverType"
	ReasonNotManaged                = "NotManaged"
	ReasonNoNodes                   = "NoNodes"
	ReasonKernelModuleConfigMissing = "KernelModuleConfigMissing"
	// ReasonPrecompiledImageMissing: nodes boot a kernel NVIDIA publishes
	// no precompiled image for (or one the nodes cannot pull).
	ReasonPrecompiledImageMissing = "PrecompiledImageMissing"
)

// MaxKernels bounds the kernels the status lists.
const MaxKernels = 32

// MaxConflicts bounds the conflicts the status lists.
const MaxConflicts = 10

// NVIDIADriverStatus is what the operator observed of the pool.
type NVIDIADriverStatus struct {
	// State is ready, notReady or disabled.
	// +kubebuilder:validation:Enum=ignored;ready;notReady;disabled
	// +optional
	State State `json:"state,omitempty"`

	// Namespace is where the driver pods run: the operator's namespace.
	// +optional
	Namespace string `json:"namespace,omitempty"`

	// ObservedGeneration is the spec generation the status describes.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`

	// Nodes counts the GPU nodes of the pool; ReadyNodes reads "ready/total".
	// +optional
	Nodes int32 `json:"nodes,omitempty"`
	// +optional
	ReadyNodes string `json:"readyNodes,omitempty"`

	// Conflicts are the nodes (at most MaxConflicts, sorted) that this
	// NVIDIADriver and another select: such a node keeps the driver it runs
	// and none is replaced until one of them stops selecting it.
	// +kubebuilder:validation:MaxItems=10
	// +listType=atomic
	// +optional
	Conflicts []NodeConflict `json:"conflicts,omitempty"`

	// Kernels are, with usePrecompiled, the kernels the NVIDIADriver's
	// nodes boot (at most MaxKernels, sorted), each with its image and
	// whether a node could pull it.
	// +kubebuilder:validation:MaxItems=32
	// +listType=atomic
	// +optional
	Kernels []KernelImage `json:"kernels,omitempty"`

	// IgnoredFields lists the fields set in the spec that this operator
	// accepts, so that NVIDIA's objects apply unchanged, and refuses to act
	// on, each with why: "spec.validator: no validator pods run: ...".
	// +listType=atomic
	// +optional
	IgnoredFields []string `json:"ignoredFields,omitempty"`

	// +listType=map
	// +listMapKey=type
	// +optional
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

// KernelImage is a kernel some nodes boot and the precompiled image built
// for it.
type KernelImage struct {
	// Kernel is the kernel version, as NFD labels it.
	Kernel string `json:"kernel"`
	// Image is the precompiled driver image for it.
	Image string `json:"image"`
	// Nodes counts the NVIDIADriver's nodes that boot it.
	Nodes int32 `json:"nodes"`
	// State is Available once a node pulled the image, Missing while
	// none can, Checking until then.
	// +kubebuilder:validation:Enum=Available;Missing;Checking
	State string `json:"state"`
	// Message is what the kubelet said of a missing image.
	// +optional
	Message string `json:"message,omitempty"`
}

// The states of a precompiled image.
const (
	ImageAvailable = "Available"
	ImageMissing   = "Missing"
	ImageChecking  = "Checking"
)

// NodeConflict is a node two or more NVIDIADrivers select.
type NodeConflict struct {
	// Node is the node's name.
	Node string `json:"node"`
	// With names the other NVIDIADrivers that select it.
	// +listType=atomic
	With []string `json:"with"`
}
