package v1

import "k8s.io/apimachinery/pkg/util/intstr"

// DriverUpgradePolicySpec says how nodes move to a new driver. Defaults are
// the ones users of the NVIDIA GPU Operator know.
type DriverUpgradePolicySpec struct {
	// AutoUpgrade lets the operator upgrade nodes on its own. When false,
	// nodes needing a new driver stay labelled upgrade-required.
	// +kubebuilder:default=true
	// +optional
	AutoUpgrade *bool `json:"autoUpgrade,omitempty"`

	// MaxParallelUpgrades is how many nodes of each driver pool (see
	// driver.nodePools; nodes matching no pool form the default pool) may
	// upgrade at once; 0 means no limit other than maxUnavailable. Pools
	// upgrade side by side, each within its own budget.
	// +kubebuilder:default=1
	// +kubebuilder:validation:Minimum=0
	// +optional
	MaxParallelUpgrades *int32 `json:"maxParallelUpgrades,omitempty"`

	// MaxUnavailable is how many GPU nodes of each driver pool may be
	// unavailable at once, as a count or a percentage of the pool's GPU
	// nodes rounded up. Nodes already cordoned or unavailable count against
	// it.
	// +kubebuilder:default="25%"
	// +kubebuilder:validation:XIntOrString
	// +kubebuilder:validation:XValidation:rule=`type(self) == int ? self >= 1 : self.matches('^([1-9][0-9]{0,8}|(100|[1-9][0-9]?)%)$')`,message="must be a count of at least 1 or a percentage from 1% to 100% (to stop upgrades, set autoUpgrade to false)"
	// +optional
	MaxUnavailable *intstr.IntOrString `json:"maxUnavailable,omitempty"`

	// WaitForCompletion waits for selected jobs on a node to finish before
	// its driver is replaced.
	// +kubebuilder:default={}
	// +optional
	WaitForCompletion WaitForCompletionSpec `json:"waitForCompletion,omitempty"`

	// PodDeletion deletes the GPU pods on a node before its driver is
	// replaced. Its helm value is driver.upgradePolicy.gpuPodDeletion.
	// +kubebuilder:default={}
	// +optional
	PodDeletion PodDeletionSpec `json:"podDeletion,omitempty"`

	// Drain drains the node when deleting GPU pods is not enough.
	// +kubebuilder:default={}
	// +optional
	Drain DrainSpec `json:"drain,omitempty"`
}

// WaitForCompletionSpec selects the jobs an upgrade waits for.
type WaitForCompletionSpec struct {
	// TimeoutSeconds bounds the wait; 0 waits for ever.
	// +kubebuilder:default=0
	// +kubebuilder:validation:Minimum=0
	// +optional
	TimeoutSeconds *int32 `json:"timeoutSeconds,omitempty"`
	// PodSelector is a label selector, such as app=training, of the pods to
	// wait for; empty waits for none.
	// +optional
	PodSelector PodSelector `json:"podSelector,omitempty"`
}

// PodDeletionSpec says how GPU pods are deleted before a driver upgrade.
type PodDeletionSpec struct {
	// Force deletes GPU pods that no controller owns.
	// +kubebuilder:default=false
	// +optional
	Force *bool `json:"force,omitempty"`
	// TimeoutSeconds bounds the deletion; 0 waits for ever.
	// +kubebuilder:default=300
	// +kubebuilder:validation:Minimum=0
	// +optional
	TimeoutSeconds *int32 `json:"timeoutSeconds,omitempty"`
	// DeleteEmptyDir deletes GPU pods that use emptyDir volumes, whose data
	// is lost.
	// +kubebuilder:default=false
	// +optional
	DeleteEmptyDir *bool `json:"deleteEmptyDir,omitempty"`
	// PodSelector is a label selector of further pods that use the GPU
	// without asking for it: pods requesting an nvidia.com/ resource or
	// running with the operator's runtime class count already.
	// +optional
	PodSelector PodSelector `json:"podSelector,omitempty"`
}

// DrainSpec says how a node is drained before a driver upgrade.
type DrainSpec struct {
	// Enable drains the node when deleting its GPU pods failed.
	// +kubebuilder:default=false
	// +optional
	Enable *bool `json:"enable,omitempty"`
	// Force drains pods that no controller owns.
	// +kubebuilder:default=false
	// +optional
	Force *bool `json:"force,omitempty"`
	// PodSelector is a label selector of the pods to drain; empty drains all.
	// +optional
	PodSelector PodSelector `json:"podSelector,omitempty"`
	// TimeoutSeconds bounds the drain; 0 waits for ever.
	// +kubebuilder:default=300
	// +kubebuilder:validation:Minimum=0
	// +optional
	TimeoutSeconds *int32 `json:"timeoutSeconds,omitempty"`
	// DeleteEmptyDir drains pods that use emptyDir volumes, whose data is
	// lost.
	// +kubebuilder:default=false
	// +optional
	DeleteEmptyDir *bool `json:"deleteEmptyDir,omitempty"`
}

// PodSelector is a label selector in kubectl's -l syntax: comma-separated
// requirements key=value, key==value, key!=value, key in (a,b),
// key notin (a,b), key and !key. The API server refuses what the operator
// could not parse: a selector that does not parse would otherwise select
// nothing, or everything. The pattern is PodSelectorPattern, a subset of
// what k8s.io/apimachinery's labels.Parse accepts (a fuzz test holds it to
// that): no > or <, no empty value in a set, at most four DNS labels in a
// key's prefix.
// +kubebuilder:validation:MaxLength=512
// +kubebuilder:validation:XValidation:rule=`size(self) == 0 || self.matches('^ *(!([a-z0-9]([-a-z0-9]{0,59}[a-z0-9])?([.][a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?){0,3}/)?[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?|([a-z0-9]([-a-z0-9]{0,59}[a-z0-9])?([.][a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?){0,3}/)?[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?( *(=|==|!=) *([A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?)?| +(in|notin) *[(] *[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?( *, *[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?)* *[)])?)( *, *(!([a-z0-9]([-a-z0-9]{0,59}[a-z0-9])?([.][a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?){0,3}/)?[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?|([a-z0-9]([-a-z0-9]{0,59}[a-z0-9])?([.][a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?){0,3}/)?[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?( *(=|==|!=) *([A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?)?| +(in|notin) *[(] *[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?( *, *[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?)* *[)])?))* *$')`,message="must be a label selector such as app=training,tier!=batch or team in (a,b): comma-separated key=value, key!=value, key in (...), key notin (...), key or !key, where keys and values are label keys and values"
type PodSelector string
