package v1

import corev1 "k8s.io/api/core/v1"

// EnvVar is an environment variable set on an operand's container: a
// value, or a key of a Secret.
// +kubebuilder:validation:XValidation:rule=`!(has(self.value) && has(self.valueFrom))`,message="set value or valueFrom, not both"
type EnvVar struct {
	// Name of the variable.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=256
	// +kubebuilder:validation:XValidation:rule=`self.matches('^[-._a-zA-Z][-._a-zA-Z0-9]*$')`,message="must consist of letters, digits, '_', '-' or '.' and must not start with a digit (for example MY_VAR)"
	// +required
	Name string `json:"name"`

	// Value of the variable.
	// +kubebuilder:validation:MaxLength=32768
	// +optional
	Value string `json:"value,omitempty"`

	// ValueFrom takes the value from a key of a Secret in the operator's
	// namespace, which the kubelet reads when the pod starts: a proxy's or
	// a license server's credentials stay out of the policy, which anyone
	// who may read it sees. The operator never reads the Secret, so the
	// few variables whose value it reads itself (the toolkit's runtime
	// paths, the device plugin's DEVICE_LIST_STRATEGY, driver.manager.env)
	// take a value only.
	// +optional
	ValueFrom *EnvVarSource `json:"valueFrom,omitempty"`
}

// EnvVarSource is where a variable's value comes from.
type EnvVarSource struct {
	// SecretKeyRef is a key of a Secret in the operator's namespace.
	// +required
	SecretKeyRef SecretKeySelector `json:"secretKeyRef"`
}

// SecretKeySelector names a key of a Secret in the operator's namespace.
type SecretKeySelector struct {
	// Name of the Secret.
	// +required
	Name ObjectName `json:"name"`
	// Key within the Secret.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:XValidation:rule=`self.matches('^[-._a-zA-Z0-9]+$')`,message="must be a Secret key: letters, digits, '-', '_' or '.'"
	// +required
	Key string `json:"key"`
	// Optional starts the container without the variable when the Secret
	// or its key is missing; otherwise the pod waits for them.
	// +optional
	Optional *bool `json:"optional,omitempty"`
}

// Core is the variable as a container's.
func (e EnvVar) Core() corev1.EnvVar {
	out := corev1.EnvVar{Name: e.Name, Value: e.Value}
	if e.ValueFrom != nil {
		ref := e.ValueFrom.SecretKeyRef
		out.ValueFrom = &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{
			LocalObjectReference: corev1.LocalObjectReference{Name: string(ref.Name)}, Key: ref.Key, Optional: ref.Optional}}
	}
	return out
}
