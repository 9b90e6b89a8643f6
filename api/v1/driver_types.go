package v1

// GPUDirectRDMASpec turns GPUDirect RDMA on: the driver pod loads
// nvidia-peermem once MOFED's mlx5 driver runs.
type GPUDirectRDMASpec struct {
	// Enabled loads nvidia-peermem.
	// +optional
	Enabled *bool `json:"enabled,omitempty"`
	// UseHostMofed says MOFED is installed on the host (its sources in
	// /usr/src) rather than by NVIDIA's network operator (in
	// /run/mellanox/drivers).
	// +optional
	UseHostMOFED *bool `json:"useHostMofed,omitempty"`
}

// IsEnabled reports whether GPUDirect RDMA is on.
func (r *GPUDirectRDMASpec) IsEnabled() bool { return r != nil && r.Enabled != nil && *r.Enabled }

// HostMOFED reports whether MOFED is the host's.
func (r *GPUDirectRDMASpec) HostMOFED() bool {
	return r != nil && r.UseHostMOFED != nil && *r.UseHostMOFED
}

// DriverKernelModuleConfig names the ConfigMap of kernel module parameters.
type DriverKernelModuleConfig struct {
	// Name is the ConfigMap's name; empty means none.
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:XValidation:rule=`size(self) == 0 || self.matches('^[a-z0-9]([-a-z0-9]*[a-z0-9])?([.][a-z0-9]([-a-z0-9]*[a-z0-9])?)*$')`,message="must be empty or a lower case DNS subdomain: letters a-z, digits, '-' and '.', starting and ending with a letter or digit"
	// +optional
	Name string `json:"name,omitempty"`
}

// PolicyPools returns the pools of driver.nodePools that are in force:
// none while NVIDIADriver resources manage the driver.
func (d *DriverSpec) PolicyPools() []DriverNodePool {
	if d.UsesNVIDIADrivers() {
		return nil
	}
	return d.NodePools
}

// UsesNVIDIADrivers reports whether NVIDIADriver resources manage the
// driver.
func (d *DriverSpec) UsesNVIDIADrivers() bool {
	return d.UseNvidiaDriverCRD != nil && *d.UseNvidiaDriverCRD
}

// IsPrecompiled reports whether the policy's pools run precompiled images.
func (d *DriverSpec) IsPrecompiled() bool { return d.UsePrecompiled != nil && *d.UsePrecompiled }

// DriverRepoConfig names the ConfigMap of package repository files.
type DriverRepoConfig struct {
	// ConfigMapName is the ConfigMap's name; empty means none.
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:XValidation:rule=`size(self) == 0 || self.matches('^[a-z0-9]([-a-z0-9]*[a-z0-9])?([.][a-z0-9]([-a-z0-9]*[a-z0-9])?)*$')`,message="must be empty or a lower case DNS subdomain: letters a-z, digits, '-' and '.', starting and ending with a letter or digit"
	// +optional
	ConfigMapName string `json:"configMapName,omitempty"`
}

// DriverCertConfig names the ConfigMap of CA certificates.
type DriverCertConfig struct {
	// Name is the ConfigMap's name; empty means none.
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:XValidation:rule=`size(self) == 0 || self.matches('^[a-z0-9]([-a-z0-9]*[a-z0-9])?([.][a-z0-9]([-a-z0-9]*[a-z0-9])?)*$')`,message="must be empty or a lower case DNS subdomain: letters a-z, digits, '-' and '.', starting and ending with a letter or digit"
	// +optional
	Name string `json:"name,omitempty"`
}

// DriverNodePool is a group of nodes with its own driver pin.
type DriverNodePool struct {
	// Name of the pool; it becomes the value of the node label
	// nvidia.com/gpu.driver-pool and part of the pool's DaemonSet names.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=32
	// +kubebuilder:validation:XValidation:rule=`self.matches('^[a-z0-9]([-a-z0-9]*[a-z0-9])?$')`,message="must be a lower case DNS label: letters a-z, digits and '-', starting and ending with a letter or digit"
	// +kubebuilder:validation:XValidation:rule=`self != 'default'`,message="default names the pool of nodes matching no pool; choose another name"
	// +required
	Name string `json:"name"`

	// NodeSelector is the labels a node must all carry to be in the pool:
	// labels of your own (such as gpu-type=h200), not the nvidia.com/gpu.*
	// and nvidia.com/mig.* ones the operator and GFD write, which change as
	// the GPU stack does (GFD's product gains -SHARED under time-slicing,
	// and all of them go while GFD restarts) and would move the node out
	// of its pool, through a driver upgrade.
	// +kubebuilder:validation:MinProperties=1
	// +kubebuilder:validation:MaxProperties=8
	// +kubebuilder:validation:XValidation:rule=`self.all(k, !k.startsWith('nvidia.com/gpu.') && !k.startsWith('nvidia.com/mig.'))`,message="must not select on nvidia.com/gpu.* or nvidia.com/mig.* labels, which the operator and GFD write and change as the GPU stack does: label the pool's nodes yourself, for example gpu-type=h200"
	// +required
	NodeSelector map[string]LabelValue `json:"nodeSelector"`

	// Version pins the pool's driver; empty means driver.version.
	// +optional
	Version DriverVersion `json:"version,omitempty"`

	// AllocationMode is how the pool's nodes serve their GPUs:
	// device-plugin or dra; empty means driver.allocationMode. A change
	// moves the pool's nodes one budget at a time: GPU pods evicted, one
	// plugin off, the other on and proven.
	// +optional
	AllocationMode AllocationMode `json:"allocationMode,omitempty"`

	// DevicePluginConfig is the configuration of devicePlugin.config's
	// ConfigMap (a key of it) that the pool's nodes run, such as a
	// time-slicing configuration; empty means devicePlugin.config.default.
	// A node's own nvidia.com/device-plugin.config label wins over it.
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:XValidation:rule=`size(self) == 0 || self.matches('^[a-zA-Z0-9]([-._a-zA-Z0-9]*[a-zA-Z0-9])?$')`,message="must be a ConfigMap key that is also a label value: at most 63 letters, digits, '-', '_' or '.', starting and ending with a letter or digit"
	// +optional
	DevicePluginConfig string `json:"devicePluginConfig,omitempty"`

	// MIGConfig is the MIG configuration of migManager.config's file that
	// the pool's nodes run, such as all-1g.18gb; empty means
	// migManager.config.default. A node's own nvidia.com/mig.config label
	// wins over it.
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:XValidation:rule=`size(self) == 0 || self.matches('^[a-zA-Z0-9]([-._a-zA-Z0-9]*[a-zA-Z0-9])?$')`,message="must be a label value: at most 63 letters, digits, '-', '_' or '.', starting and ending with a letter or digit"
	// +optional
	MIGConfig string `json:"migConfig,omitempty"`
}

// DriverVersion is an NVIDIA driver version (two or three dotted numbers),
// a driver branch (precompiled images only) or an image digest.
// +kubebuilder:validation:MaxLength=71
// +kubebuilder:validation:XValidation:rule=`size(self) == 0 || self.matches('^([0-9]+([.][0-9]+){0,2}|sha256:[a-f0-9]{64})$')`,message="must be a driver version such as 535.154.05 (without the OS suffix, which the operator adds), a branch such as 580 (with usePrecompiled), or an image digest written sha256:<64 lower case hex digits>"
type DriverVersion string
