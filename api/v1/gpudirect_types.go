package v1

import apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"

// GPUDirectStorageSpec runs NVIDIA's GPUDirect Storage kernel module
// (nvidia-fs) in a container of the driver pod, as NVIDIA's operator does.
// The image is tagged per OS: the operator appends -<os> to version.
type GPUDirectStorageSpec struct {
	// Enabled loads nvidia-fs beside the driver.
	// +optional
	Enabled *bool `json:"enabled,omitempty"`
	// Repository is the registry path of the image.
	// +kubebuilder:default="nvcr.io/nvidia/cloud-native"
	// +optional
	Repository Repository `json:"repository,omitempty"`
	// Image is the image name.
	// +kubebuilder:default=nvidia-fs
	// +optional
	Image ImageName `json:"image,omitempty"`
	// Version is the image tag without the OS suffix, or a digest.
	// +kubebuilder:default="2.29.4"
	// +kubebuilder:validation:XValidation:rule=`!self.contains('@')`,message="the image is tagged per OS (<version>-<os>): a tag, or a digest alone (sha256:<digest>), not tag@digest"
	// +optional
	Version ImageVersion `json:"version,omitempty"`

	SidecarSettings `json:",inline"`
}

// GDRCopySpec runs NVIDIA's GDRCopy kernel module (gdrdrv) in a container
// of the driver pod, as NVIDIA's operator does. The image is tagged per
// OS: the operator appends -<os> to version.
type GDRCopySpec struct {
	// Enabled loads gdrdrv beside the driver.
	// +optional
	Enabled *bool `json:"enabled,omitempty"`
	// Repository is the registry path of the image.
	// +kubebuilder:default="nvcr.io/nvidia/cloud-native"
	// +optional
	Repository Repository `json:"repository,omitempty"`
	// Image is the image name.
	// +kubebuilder:default=gdrdrv
	// +optional
	Image ImageName `json:"image,omitempty"`
	// Version is the image tag without the OS suffix, or a digest.
	// +kubebuilder:default="v2.6"
	// +kubebuilder:validation:XValidation:rule=`!self.contains('@')`,message="the image is tagged per OS (<version>-<os>): a tag, or a digest alone (sha256:<digest>), not tag@digest"
	// +optional
	Version ImageVersion `json:"version,omitempty"`

	SidecarSettings `json:",inline"`
}

// SidecarSettings are the settings of a container the driver pod runs
// beside the driver.
type SidecarSettings struct {
	// ImagePullPolicy of the container; empty means the Kubernetes
	// default.
	// +kubebuilder:validation:Enum=Always;IfNotPresent;Never
	// +optional
	ImagePullPolicy string `json:"imagePullPolicy,omitempty"`
	// ImagePullSecrets names Secrets in the operator namespace used to
	// pull the image.
	// +kubebuilder:validation:MaxItems=16
	// +listType=set
	// +optional
	ImagePullSecrets []ObjectName `json:"imagePullSecrets,omitempty"`
	// Env is added to the container.
	// +kubebuilder:validation:MaxItems=64
	// +listType=map
	// +listMapKey=name
	// +optional
	Env []EnvVar `json:"env,omitempty"`
	// Args is accepted for compatibility and not acted on: NVIDIA's
	// operator does not pass it either.
	// +optional
	Args *apiextensionsv1.JSON `json:"args,omitempty" refused:"NVIDIA's operator does not pass them to the container either (v26.7.0)"`
}

// IsEnabled reports whether GPUDirect Storage is on.
func (g *GPUDirectStorageSpec) IsEnabled() bool { return g != nil && g.Enabled != nil && *g.Enabled }

// IsEnabled reports whether GDRCopy is on.
func (g *GDRCopySpec) IsEnabled() bool { return g != nil && g.Enabled != nil && *g.Enabled }
