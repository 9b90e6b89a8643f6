package v1

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// ComponentSpec holds the settings every operand shares. Each operand's
// section embeds it inline, so the API has one definition of these fields.
// The image coordinates (repository, image, version) live in each operand's
// own type because their defaults differ per operand.
type ComponentSpec struct {
	// Enabled deploys the operand. When false its objects are removed and its
	// state is "disabled" on every node, so the operands after it proceed.
	// +kubebuilder:default=true
	// +optional
	Enabled *bool `json:"enabled,omitempty"`

	ContainerSettings `json:",inline"`
}

// ContainerSettings are the settings of an operand's containers, apart
// from whether it is enabled: migManager, off by default unlike the
// others, has them without ComponentSpec's enabled.
type ContainerSettings struct {
	// ImagePullPolicy of the operand's containers; empty means the
	// Kubernetes default.
	// +kubebuilder:validation:Enum=Always;IfNotPresent;Never
	// +optional
	ImagePullPolicy corev1.PullPolicy `json:"imagePullPolicy,omitempty"`

	// ImagePullSecrets names Secrets in the operator namespace used to pull
	// the operand's image.
	// +kubebuilder:validation:MaxItems=16
	// +listType=set
	// +optional
	ImagePullSecrets []ObjectName `json:"imagePullSecrets,omitempty"`

	// Env is added to the operand's main container; a name set here
	// overrides the operator's own value for it.
	// +kubebuilder:validation:MaxItems=64
	// +listType=map
	// +listMapKey=name
	// +optional
	Env []EnvVar `json:"env,omitempty"`

	// Args replace the arguments of the operand's main container, as in the
	// NVIDIA GPU Operator. The driver's default arguments are [init], so
	// driver.args must start with init.
	// +kubebuilder:validation:MaxItems=64
	// +kubebuilder:validation:items:MaxLength=4096
	// +listType=atomic
	// +optional
	Args []string `json:"args,omitempty"`

	// Resources of the operand's main container.
	// +optional
	Resources *ResourceRequirements `json:"resources,omitempty"`

	// HostNetwork runs the operand's pods in the node's network namespace,
	// with DNS policy ClusterFirstWithHostNet, as NVIDIA's hostNetwork
	// does (gpu-operator v26.7.0 controllers/object_controls.go:
	// applyHostNetworkConfig). devicePlugin's applies to the MPS control
	// daemon too.
	// +optional
	HostNetwork *bool `json:"hostNetwork,omitempty"`
}

// UsesHostNetwork reports whether the operand's pods run in the node's
// network namespace.
func (c *ContainerSettings) UsesHostNetwork() bool { return c.HostNetwork != nil && *c.HostNetwork }

// IsEnabled reports whether the operand is to be deployed. An unset value
// means enabled, as the CRD default says.
func (c *ComponentSpec) IsEnabled() bool { return c.Enabled == nil || *c.Enabled }

// ResourceRequirements are the compute resources of an operand's container.
// Each map holds at most 5 resources, and each quantity at most 64
// characters (set by hack/sync-generated.sh, as no marker reaches a map's
// values): the CRD's CEL cost budget allows no more.
// +kubebuilder:validation:XValidation:rule=`!has(self.limits) || !has(self.requests) || self.requests.all(r, !(r in self.limits) || quantity(string(self.requests[r])).compareTo(quantity(string(self.limits[r]))) <= 0)`,message="every request must be less than or equal to the limit of the same resource"
type ResourceRequirements struct {
	// Limits is the most of each resource the container may use.
	// +kubebuilder:validation:MaxProperties=5
	// +kubebuilder:validation:XValidation:rule=`self.all(k, k.matches('^([a-z0-9]([-a-z0-9]*[a-z0-9])?([.][a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?$'))`,message="every key must be a resource name such as cpu, memory or example.com/device"
	// +kubebuilder:validation:XValidation:rule=`self.all(k, !quantity(string(self[k])).isLessThan(quantity('0')))`,message="quantities must not be negative"
	// +optional
	Limits corev1.ResourceList `json:"limits,omitempty"`
	// Requests is what the scheduler reserves for the container.
	// +kubebuilder:validation:MaxProperties=5
	// +kubebuilder:validation:XValidation:rule=`self.all(k, k.matches('^([a-z0-9]([-a-z0-9]*[a-z0-9])?([.][a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?$'))`,message="every key must be a resource name such as cpu, memory or example.com/device"
	// +kubebuilder:validation:XValidation:rule=`self.all(k, !quantity(string(self[k])).isLessThan(quantity('0')))`,message="quantities must not be negative"
	// +optional
	Requests corev1.ResourceList `json:"requests,omitempty"`
}

// ObjectName is the name of a Kubernetes object: a DNS subdomain.
// +kubebuilder:validation:MinLength=1
// +kubebuilder:validation:MaxLength=253
// +kubebuilder:validation:XValidation:rule=`self.matches('^[a-z0-9]([-a-z0-9]*[a-z0-9])?([.][a-z0-9]([-a-z0-9]*[a-z0-9])?)*$')`,message="must be a lower case DNS subdomain: letters a-z, digits, '-' and '.', starting and ending with a letter or digit (for example nvidia)"
type ObjectName string

// Repository is an image registry path without the image name, such as
// nvcr.io/nvidia. It may be empty for images on the default registry.
// +kubebuilder:validation:MaxLength=255
// +kubebuilder:validation:XValidation:rule=`size(self) == 0 || self.matches('^[a-zA-Z0-9]([-a-zA-Z0-9.]*[a-zA-Z0-9])?(:[0-9]+)?(/[a-z0-9]+([._-][a-z0-9]+)*)*$')`,message="must be a registry path such as nvcr.io/nvidia: a host, an optional :port, then lower case path segments, without the image name"
type Repository string

// ImageName is an image name within a repository, without tag or digest.
// +kubebuilder:validation:MaxLength=255
// +kubebuilder:validation:XValidation:rule=`size(self) == 0 || self.matches('^[a-z0-9]+([._-][a-z0-9]+)*(/[a-z0-9]+([._-][a-z0-9]+)*)*$')`,message="must be an image name such as driver: lower case letters, digits, '.', '_', '-' and '/', without a tag or digest (set version for those)"
type ImageName string

// ImageVersion is an image tag, a digest written sha256:<64 hex digits>,
// or both, tag@sha256:<digest>: the tag for people, the digest for the
// runtime, which pulls by the digest.
// +kubebuilder:validation:MaxLength=200
// +kubebuilder:validation:XValidation:rule=`size(self) == 0 || self.matches('^(sha256:[a-f0-9]{64}|[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}(@sha256:[a-f0-9]{64})?)$')`,message="must be an image tag (letters, digits, '_', '.', '-', at most 128, not starting with '.' or '-'), a digest written sha256:<64 lower case hex digits>, or both as tag@sha256:<digest>"
type ImageVersion string

// Labels are Kubernetes labels: qualified names as keys, label values as
// values.
// +kubebuilder:validation:MaxProperties=64
// +kubebuilder:validation:XValidation:rule=`self.all(k, k.matches('^([a-z0-9]([-a-z0-9]*[a-z0-9])?([.][a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?$'))`,message="every key must be a label key: an optional DNS-subdomain prefix and '/', then a name of at most 63 letters, digits, '-', '_' or '.', starting and ending with a letter or digit"
type Labels map[string]LabelValue

// LabelValue is a Kubernetes label value.
// +kubebuilder:validation:MaxLength=63
// +kubebuilder:validation:XValidation:rule=`self.matches('^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$')`,message="must be a label value: empty, or at most 63 letters, digits, '-', '_' or '.', starting and ending with a letter or digit"
type LabelValue string

// Annotations are Kubernetes annotations: qualified names as keys.
// +kubebuilder:validation:MaxProperties=64
// +kubebuilder:validation:XValidation:rule=`self.all(k, k.matches('^([a-z0-9]([-a-z0-9]*[a-z0-9])?([.][a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?$'))`,message="every key must be an annotation key: an optional DNS-subdomain prefix and '/', then a name of at most 63 letters, digits, '-', '_' or '.', starting and ending with a letter or digit"
type Annotations map[string]string

// DaemonsetsSpec holds settings shared by every operand DaemonSet.
type DaemonsetsSpec struct {
	// Labels are added to every operand DaemonSet and its pods.
	// +optional
	Labels Labels `json:"labels,omitempty"`

	// Annotations are added to every operand DaemonSet and its pods.
	// +optional
	Annotations Annotations `json:"annotations,omitempty"`

	// Tolerations are added to every operand pod, next to the operator's
	// own toleration of nvidia.com/gpu:NoSchedule.
	// +kubebuilder:validation:MaxItems=64
	// +listType=atomic
	// +optional
	Tolerations []Toleration `json:"tolerations,omitempty"`

	// PriorityClassName of every operand pod.
	// +kubebuilder:default=system-node-critical
	// +optional
	PriorityClassName ObjectName `json:"priorityClassName,omitempty"`

	// UpdateStrategy of every operand DaemonSet except the driver's, whose
	// pods the operator replaces itself during a driver upgrade.
	// +kubebuilder:default=RollingUpdate
	// +kubebuilder:validation:Enum=RollingUpdate;OnDelete
	// +optional
	UpdateStrategy string `json:"updateStrategy,omitempty"`

	// RollingUpdate tunes the RollingUpdate strategy.
	// +optional
	RollingUpdate *RollingUpdateSpec `json:"rollingUpdate,omitempty"`

	// PodSecurityContext replaces the pod security context of every
	// operand pod but NFD's, as NVIDIA's does (gpu-operator v26.7.0
	// controllers/object_controls.go: applyCommonDaemonsetConfig), whose
	// operator does not deploy NFD. The containers' own security contexts
	// (privileged where the operand needs it) win over it. It is part of
	// the driver pod: a change replaces the drivers through the upgrade.
	// +optional
	PodSecurityContext *corev1.PodSecurityContext `json:"podSecurityContext,omitempty"`
}

// Toleration is a pod toleration (corev1.Toleration), checked here as the
// API server checks it on the operand pods: a toleration it would refuse
// there is refused on the policy, naming the field, instead of failing
// every apply of every DaemonSet later.
// +kubebuilder:validation:XValidation:rule=`(has(self.key) && size(self.key) > 0) || (has(self.operator) && self.operator == 'Exists')`,message="operator must be Exists when key is empty (a toleration of every taint)"
// +kubebuilder:validation:XValidation:rule=`!has(self.operator) || self.operator != 'Exists' || !has(self.value) || size(self.value) == 0`,message="value must be empty when operator is Exists"
// +kubebuilder:validation:XValidation:rule=`!has(self.tolerationSeconds) || (has(self.effect) && self.effect == 'NoExecute')`,message="tolerationSeconds needs effect NoExecute"
type Toleration struct {
	// Key is the taint key the toleration applies to; empty with operator
	// Exists tolerates every taint.
	// +kubebuilder:validation:MaxLength=317
	// +kubebuilder:validation:XValidation:rule=`size(self) == 0 || self.matches('^([a-z0-9]([-a-z0-9]*[a-z0-9])?([.][a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?$')`,message="must be a taint key: an optional DNS-subdomain prefix and '/', then a name of at most 63 letters, digits, '-', '_' or '.', starting and ending with a letter or digit"
	// +optional
	Key string `json:"key,omitempty"`
	// Operator is Equal (the default: key and value match) or Exists.
	// +kubebuilder:validation:Enum=Equal;Exists
	// +optional
	Operator corev1.TolerationOperator `json:"operator,omitempty"`
	// Value the taint must have with operator Equal: a label value.
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:XValidation:rule=`self.matches('^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$')`,message="must be a label value: empty, or at most 63 letters, digits, '-', '_' or '.', starting and ending with a letter or digit"
	// +optional
	Value string `json:"value,omitempty"`
	// Effect is the taint effect to tolerate; empty tolerates every effect.
	// +kubebuilder:validation:Enum=NoSchedule;PreferNoSchedule;NoExecute
	// +optional
	Effect corev1.TaintEffect `json:"effect,omitempty"`
	// TolerationSeconds is how long a pod stays on a node after a NoExecute
	// taint appears; unset stays for ever.
	// +optional
	TolerationSeconds *int64 `json:"tolerationSeconds,omitempty"`
}

// Core returns the toleration as the pod spec holds it.
func (t Toleration) Core() corev1.Toleration {
	return corev1.Toleration{Key: t.Key, Operator: t.Operator, Value: t.Value, Effect: t.Effect, TolerationSeconds: t.TolerationSeconds}
}

// RollingUpdateSpec tunes the rolling update of operand DaemonSets.
type RollingUpdateSpec struct {
	// MaxUnavailable is how many nodes may be without the operand during a
	// rolling update: a count, or a percentage of the nodes. A count written
	// as a string ("1"), as the NVIDIA GPU Operator's chart does, is accepted.
	// +kubebuilder:validation:XIntOrString
	// +kubebuilder:validation:XValidation:rule=`type(self) == int ? self >= 1 : self.matches('^([1-9][0-9]{0,8}|(100|[1-9][0-9]?)%)$')`,message="must be a count of at least 1 or a percentage from 1% to 100%"
	// +optional
	MaxUnavailable *intstr.IntOrString `json:"maxUnavailable,omitempty"`
}
