package v1

import (
	"fmt"
	"strconv"

	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
)

// ValidatorSpec is NVIDIA's validator section. No validator DaemonSet runs
// here: each state proves itself on each node, and the last proof, the
// cuda-workload state, runs the validator image's CUDA sample (vectorAdd)
// in a pod that asks for one GPU as workloads do. The fields that shape
// that pod are honoured; the others are kept and refused with a reason.
type ValidatorSpec struct {
	// Repository is the registry path of the image that holds the CUDA
	// sample: NVIDIA's validator image.
	// +kubebuilder:default="nvcr.io/nvidia"
	// +optional
	Repository Repository `json:"repository,omitempty"`
	// Image is the image name: NVIDIA ships vectorAdd in its operator's
	// image (gpu-operator v26.7.0 docker/Dockerfile: /usr/bin/vectorAdd).
	// +kubebuilder:default=gpu-operator
	// +optional
	Image ImageName `json:"image,omitempty"`
	// Version is the image's tag or digest.
	// +kubebuilder:default="v26.7.0"
	// +optional
	Version ImageVersion `json:"version,omitempty"`

	// ImagePullPolicy of the CUDA workload's container.
	// +kubebuilder:validation:Enum=Always;IfNotPresent;Never
	// +optional
	ImagePullPolicy corev1.PullPolicy `json:"imagePullPolicy,omitempty"`
	// ImagePullSecrets names Secrets in the operator namespace used to pull
	// the image.
	// +kubebuilder:validation:MaxItems=16
	// +listType=set
	// +optional
	ImagePullSecrets []ObjectName `json:"imagePullSecrets,omitempty"`
	// Env is added to the CUDA workload's container.
	// +kubebuilder:validation:MaxItems=64
	// +listType=map
	// +listMapKey=name
	// +optional
	Env []EnvVar `json:"env,omitempty"`
	// Resources of the CUDA workload's container, beside the one GPU it
	// asks for.
	// +optional
	Resources *ResourceRequirements `json:"resources,omitempty"`
	// HostNetwork runs the CUDA workload in the node's network namespace.
	// +optional
	HostNetwork *bool `json:"hostNetwork,omitempty"`

	// CUDA is NVIDIA's CUDA validation: its env's WITH_WORKLOAD=false
	// turns the CUDA workload proof off, as it turns NVIDIA's CUDA
	// workload off (gpu-operator v26.7.0 cmd/nvidia-validator/main.go:
	// with-workload, default true).
	// +optional
	CUDA *ValidatorComponentSpec `json:"cuda,omitempty"`
	// Plugin is NVIDIA's device plugin validation: its env's
	// WITH_WORKLOAD=true asks for the workload through the device plugin,
	// which the CUDA workload proof always is, so it keeps the proof on
	// even where cuda's turns it off.
	// +optional
	Plugin *ValidatorComponentSpec `json:"plugin,omitempty"`

	// Args is accepted and not acted on.
	// +optional
	Args *apiextensionsv1.JSON `json:"args,omitempty" refused:"the CUDA workload runs vectorAdd, which takes no arguments, and no validator container runs to take them"`
	// Driver is accepted and not acted on.
	// +optional
	Driver *apiextensionsv1.JSON `json:"driver,omitempty" refused:"no driver validation container runs: the driver state proves itself by the driver container's own probe (nvidia-smi)"`
	// Toolkit is accepted and not acted on.
	// +optional
	Toolkit *apiextensionsv1.JSON `json:"toolkit,omitempty" refused:"no toolkit validation container runs: the container-toolkit state proves itself by the runtime's NVIDIA handler"`
	// VFIOPCI is accepted and not acted on.
	// +optional
	VFIOPCI *apiextensionsv1.JSON `json:"vfioPCI,omitempty" refused:"VM passthrough is out of scope"`
	// VGPUManager is accepted and not acted on.
	// +optional
	VGPUManager *apiextensionsv1.JSON `json:"vgpuManager,omitempty" refused:"vGPU is out of scope"`
	// VGPUDevices is accepted and not acted on.
	// +optional
	VGPUDevices *apiextensionsv1.JSON `json:"vgpuDevices,omitempty" refused:"vGPU is out of scope"`
}

// ValidatorComponentSpec is one of NVIDIA's validation components: of its
// env, only WITH_WORKLOAD is read.
type ValidatorComponentSpec struct {
	// Env of NVIDIA's validation container. WITH_WORKLOAD is read; any
	// other name is reported in status.ignoredFields.
	// +kubebuilder:validation:MaxItems=64
	// +kubebuilder:validation:XValidation:rule=`self.all(e, e.name != 'WITH_WORKLOAD' || (!has(e.valueFrom) && (!has(e.value) || e.value in ['', '1', 't', 'T', 'TRUE', 'true', 'True', '0', 'f', 'F', 'FALSE', 'false', 'False'])))`,message="WITH_WORKLOAD is a boolean value such as true or false, not a Secret's key"
	// +listType=map
	// +listMapKey=name
	// +optional
	Env []EnvVar `json:"env,omitempty"`
}

// EnvWithWorkload is the validator's switch of its CUDA workload.
const EnvWithWorkload = "WITH_WORKLOAD"

// The image NVIDIA's validator runs (gpu-operator v26.7.0), used where a
// policy predates the section's defaults.
const (
	DefaultValidatorRepository = "nvcr.io/nvidia"
	DefaultValidatorImage      = "gpu-operator"
	DefaultValidatorVersion    = "v26.7.0"
)

// withWorkload returns the component's WITH_WORKLOAD as a boolean, and
// whether it sets one that parses.
func (c *ValidatorComponentSpec) withWorkload() (on, set bool) {
	if c == nil {
		return false, false
	}
	for _, e := range c.Env {
		if e.Name == EnvWithWorkload && e.ValueFrom == nil && e.Value != "" {
			v, err := strconv.ParseBool(e.Value)
			return v, err == nil
		}
	}
	return false, false
}

// WorkloadProof reports whether the CUDA workload proof runs: unless
// cuda's WITH_WORKLOAD turns it off and plugin's does not ask for it.
func (v *ValidatorSpec) WorkloadProof() bool {
	if v == nil {
		return true
	}
	cudaOn, cudaSet := v.CUDA.withWorkload()
	pluginOn, _ := v.Plugin.withWorkload()
	return !cudaSet || cudaOn || pluginOn
}

// ImageParts returns the CUDA workload's image coordinates, the defaults
// where the policy leaves them empty.
func (v *ValidatorSpec) ImageParts() (repository, image, version string) {
	repository, image, version = DefaultValidatorRepository, DefaultValidatorImage, DefaultValidatorVersion
	if v == nil {
		return repository, image, version
	}
	if v.Repository != "" {
		repository = string(v.Repository)
	}
	if v.Image != "" {
		image = string(v.Image)
	}
	if v.Version != "" {
		version = string(v.Version)
	}
	return repository, image, version
}

// Container returns the validator's container settings, in the shape the
// operands' renderers take; args are not among them (refused above).
func (v *ValidatorSpec) Container() *ContainerSettings {
	if v == nil {
		return &ContainerSettings{}
	}
	return &ContainerSettings{ImagePullPolicy: v.ImagePullPolicy, ImagePullSecrets: v.ImagePullSecrets, Env: v.Env,
		Resources: v.Resources, HostNetwork: v.HostNetwork}
}

// ValidatorEnvRefusals returns "<path>.<component>.env[<name>]: <why>" for
// each variable of cuda's and plugin's env other than WITH_WORKLOAD: no
// validation container runs to read them.
func ValidatorEnvRefusals(v *ValidatorSpec, path string) []string {
	if v == nil {
		return nil
	}
	var out []string
	for _, c := range []struct {
		name string
		spec *ValidatorComponentSpec
	}{{"cuda", v.CUDA}, {"plugin", v.Plugin}} {
		if c.spec == nil {
			continue
		}
		for _, e := range c.spec.Env {
			if e.Name != EnvWithWorkload {
				out = append(out, fmt.Sprintf("%s.%s.env[%s]: no validation container runs to read it; only %s is read, "+
					"and validator.env reaches the CUDA workload's container", path, c.name, e.Name, EnvWithWorkload))
			}
		}
	}
	return out
}
