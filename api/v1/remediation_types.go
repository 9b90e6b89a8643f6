package v1

import "k8s.io/apimachinery/pkg/util/intstr"

// RemediationSpec configures the repair of GPU nodes whose device plugin
// reports unhealthy GPUs (their allocatable GPU resources below capacity).
// A node's repair is a state machine on the node label
// nvidia.com/gpu-remediation-state: it is tainted nvidia.com/gpu.unhealthy
// (NoSchedule), its GPU pods are evicted, its device plugin is restarted,
// then its driver reloaded if the GPUs are still unhealthy; a node they
// do not heal is marked reboot-required.
type RemediationSpec struct {
	// Enabled makes the operator repair GPU nodes with unhealthy GPUs.
	// Turning it off stops every repair where it stands and removes the
	// operator's remediation labels and taints.
	// +optional
	Enabled bool `json:"enabled,omitempty"`

	// MaxParallel is how many GPU nodes the repairs may hold out of
	// service at once (tainted: under way, awaiting a reboot, or failed):
	// a count, or a percentage of the GPU nodes rounded up. It is the
	// repairs' own share: nodes other operations hold do not take its
	// places, so repairs go on during a driver rollout. Driver upgrades
	// count the nodes under repair against their maxUnavailable and never
	// start on one. (Its length is
	// bounded so that the CRD's validation rules stay within the API
	// server's cost budget.)
	// +kubebuilder:default=1
	// +kubebuilder:validation:XIntOrString
	// +kubebuilder:validation:MaxLength=10
	// +kubebuilder:validation:XValidation:rule=`type(self) == int ? self >= 1 : self.matches('^([1-9][0-9]{0,8}|(100|[1-9][0-9]?)%)$')`,message="must be a count of at least 1 or a percentage from 1% to 100% (to stop repairs, set enabled to false)"
	// +optional
	MaxParallel *intstr.IntOrString `json:"maxParallel,omitempty"`

	// AutoStart lets the operator start a node's repair on its own. When
	// false, a node with unhealthy GPUs waits, labelled
	// remediation-required, until someone sets the annotation
	// nvidia.com/gpu-remediation.approved=true on it; the operator removes
	// the annotation when the repair starts.
	// +kubebuilder:default=true
	// +optional
	AutoStart *bool `json:"autoStart,omitempty"`

	// EvictionTimeoutSeconds bounds the eviction of the node's GPU pods
	// (through the Eviction API, which honours PodDisruptionBudgets); a
	// node with GPU pods left after it fails its repair.
	// +kubebuilder:default=300
	// +kubebuilder:validation:Minimum=30
	// +optional
	EvictionTimeoutSeconds *int32 `json:"evictionTimeoutSeconds,omitempty"`

	// ValidationTimeoutSeconds bounds each wait for the GPUs to come back:
	// after the device plugin's restart, the driver's reload (a driver
	// container may build its modules for 20 minutes) and a reboot.
	// +kubebuilder:default=1800
	// +kubebuilder:validation:Minimum=60
	// +optional
	ValidationTimeoutSeconds *int32 `json:"validationTimeoutSeconds,omitempty"`
}

// Remediation defaults, for a policy stored before the fields existed.
const (
	defaultEvictionTimeoutSeconds   = 300
	defaultValidationTimeoutSeconds = 1800
)

// MaxParallelOrDefault is MaxParallel, or 1 when unset.
func (s *RemediationSpec) MaxParallelOrDefault() intstr.IntOrString {
	if s.MaxParallel == nil {
		return intstr.FromInt32(1)
	}
	return *s.MaxParallel
}

// AutoStarts reports whether repairs start without an approval.
func (s *RemediationSpec) AutoStarts() bool { return s.AutoStart == nil || *s.AutoStart }

// EvictionTimeout is EvictionTimeoutSeconds, or its default when unset.
func (s *RemediationSpec) EvictionTimeout() int32 {
	if s.EvictionTimeoutSeconds == nil {
		return defaultEvictionTimeoutSeconds
	}
	return *s.EvictionTimeoutSeconds
}

// ValidationTimeout is ValidationTimeoutSeconds, or its default when unset.
func (s *RemediationSpec) ValidationTimeout() int32 {
	if s.ValidationTimeoutSeconds == nil {
		return defaultValidationTimeoutSeconds
	}
	return *s.ValidationTimeoutSeconds
}
