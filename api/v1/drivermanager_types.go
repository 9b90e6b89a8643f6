package v1

import (
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
)

// The settings of NVIDIA's k8s-driver-manager (v0.12.0,
// cmd/driver-manager/main.go) that the operator honours. NVIDIA's manager,
// an init container of each driver pod, reads them when the pod starts on
// a node whose driver is loaded: it cordons the node, evicts the pods that
// use a GPU, drains the node if that fails, then lets the new driver load.
// Here the driver upgrade's state machine does the same for a driver pod
// replaced outside an upgrade (docs/driver-upgrades.md).
const (
	// ManagerEnvGPUPodEviction: evict the GPU pods first (default true).
	ManagerEnvGPUPodEviction = "ENABLE_GPU_POD_EVICTION"
	// ManagerEnvAutoDrain: drain the node when evicting GPU pods fails
	// (default false).
	ManagerEnvAutoDrain = "ENABLE_AUTO_DRAIN"
	// ManagerEnvDrainForce: evict and drain pods no controller owns.
	ManagerEnvDrainForce = "DRAIN_USE_FORCE"
	// ManagerEnvDrainPodSelector: the pods a drain evicts (all if empty).
	ManagerEnvDrainPodSelector = "DRAIN_POD_SELECTOR_LABEL"
	// ManagerEnvDrainTimeout: how long the eviction and the drain may take,
	// a duration such as 300s (default 0s: no limit).
	ManagerEnvDrainTimeout = "DRAIN_TIMEOUT_SECONDS"
	// ManagerEnvDrainDeleteEmptyDir: evict and drain pods with emptyDir
	// volumes, whose data is lost.
	ManagerEnvDrainDeleteEmptyDir = "DRAIN_DELETE_EMPTYDIR_DATA"
)

// ManagerEnvHonoured lists the driver manager settings the operator acts on.
var ManagerEnvHonoured = []string{ManagerEnvGPUPodEviction, ManagerEnvAutoDrain, ManagerEnvDrainForce,
	ManagerEnvDrainPodSelector, ManagerEnvDrainTimeout, ManagerEnvDrainDeleteEmptyDir}

// DriverManagerSpec is NVIDIA's driver.manager: the k8s-driver-manager
// init container of NVIDIA's driver pods. No such container runs here.
// The eviction settings in its env are honoured by the driver upgrade
// when a person replaces a driver pod outside an upgrade; its image and
// its other settings are refused, each named in status.ignoredFields.
// +kubebuilder:validation:XValidation:rule=`!has(self.env) || self.env.all(e, !(e.name in ['ENABLE_GPU_POD_EVICTION', 'ENABLE_AUTO_DRAIN', 'DRAIN_USE_FORCE', 'DRAIN_DELETE_EMPTYDIR_DATA']) || e.value in ['1', 't', 'T', 'TRUE', 'true', 'True', '0', 'f', 'F', 'FALSE', 'false', 'False'])`,message="env: ENABLE_GPU_POD_EVICTION, ENABLE_AUTO_DRAIN, DRAIN_USE_FORCE and DRAIN_DELETE_EMPTYDIR_DATA take true or false"
// +kubebuilder:validation:XValidation:rule=`!has(self.env) || self.env.all(e, e.name != 'DRAIN_TIMEOUT_SECONDS' || e.value.matches('^(0|([0-9]+(\\.[0-9]+)?(ns|us|ms|s|m|h))+)$'))`,message="env: DRAIN_TIMEOUT_SECONDS takes a duration such as 300s or 5m (0s: no limit)"
type DriverManagerSpec struct {
	// Env holds NVIDIA's k8s-driver-manager settings. Honoured, for a
	// driver pod replaced outside an upgrade: ENABLE_GPU_POD_EVICTION
	// (default true), ENABLE_AUTO_DRAIN (default false), DRAIN_USE_FORCE,
	// DRAIN_POD_SELECTOR_LABEL, DRAIN_TIMEOUT_SECONDS (a duration, default
	// 0s: no limit) and DRAIN_DELETE_EMPTYDIR_DATA. Where autoUpgrade is
	// on, the upgradePolicy's settings apply instead, as they supersede
	// these at NVIDIA. Any other name is refused, and so is valueFrom: the
	// operator reads each value.
	// +kubebuilder:validation:MaxItems=64
	// +kubebuilder:validation:XValidation:rule=`self.all(e, !has(e.valueFrom))`,message="takes values, not valueFrom: the operator reads each setting"
	// +listType=map
	// +listMapKey=name
	// +optional
	Env []EnvVar `json:"env,omitempty"`

	UnsupportedDriverManagerFields `json:",inline"`
}

// UnsupportedDriverManagerFields are the image fields of NVIDIA's
// driver.manager: no driver manager container runs.
type UnsupportedDriverManagerFields struct {
	// +optional
	Repository *apiextensionsv1.JSON `json:"repository,omitempty" refused:"no k8s-driver-manager container runs: the driver upgrade evicts GPU pods as its env says"`
	// +optional
	Image *apiextensionsv1.JSON `json:"image,omitempty" refused:"no k8s-driver-manager container runs: the driver upgrade evicts GPU pods as its env says"`
	// +optional
	Version *apiextensionsv1.JSON `json:"version,omitempty" refused:"no k8s-driver-manager container runs: the driver upgrade evicts GPU pods as its env says"`
	// +optional
	ImagePullPolicy *apiextensionsv1.JSON `json:"imagePullPolicy,omitempty" refused:"no k8s-driver-manager container runs: the driver upgrade evicts GPU pods as its env says"`
	// +optional
	ImagePullSecrets *apiextensionsv1.JSON `json:"imagePullSecrets,omitempty" refused:"no k8s-driver-manager container runs: the driver upgrade evicts GPU pods as its env says"`
}
