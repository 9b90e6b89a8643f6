package v1

import (
	"path"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
)

// CDISpec says how containers get their GPUs: through the Container Device
// Interface (the runtime injects the devices a CDI spec names), NVIDIA's
// default since its v25.10, or through the NVIDIA runtime reading the
// visible-devices list.
// +kubebuilder:validation:XValidation:rule=`!has(self.nriPluginEnabled) || !self.nriPluginEnabled || !has(self.enabled) || self.enabled`,message="nriPluginEnabled injects CDI devices: it needs cdi.enabled=true; set cdi.enabled=true or nriPluginEnabled=false",fieldPath=".nriPluginEnabled"
type CDISpec struct {
	// Enabled hands GPUs to containers through CDI: the toolkit writes the
	// node's spec for management containers and turns CDI on in the
	// runtime, and the device plugin allocates devices by CDI name.
	// +kubebuilder:default=true
	// +optional
	Enabled *bool `json:"enabled,omitempty"`
	// NRIPluginEnabled has the toolkit inject the operands' GPUs through
	// the container runtime's NRI (containerd 2.x, CRI-O) instead of a
	// runtime handler: no runtime config is written and no RuntimeClass is
	// used. Needs enabled and the toolkit.
	// +kubebuilder:default=false
	// +optional
	NRIPluginEnabled *bool `json:"nriPluginEnabled,omitempty"`
	// Default is accepted for compatibility: NVIDIA deprecated it in
	// v25.10, and CDI mode follows enabled.
	// +optional
	Default *apiextensionsv1.JSON `json:"default,omitempty" refused:"NVIDIA deprecated it in v25.10 and reads it nowhere: CDI is on or off with cdi.enabled"`
}

// IsEnabled reports whether GPUs are handed out through CDI: unless it is
// turned off, as in NVIDIA's chart.
func (c *CDISpec) IsEnabled() bool { return c == nil || c.Enabled == nil || *c.Enabled }

// UsesNRI reports whether the toolkit injects the operands' GPUs through
// NRI: with CDI only.
func (c *CDISpec) UsesNRI() bool {
	return c.IsEnabled() && c != nil && c.NRIPluginEnabled != nil && *c.NRIPluginEnabled
}

// HostPathsSpec says where a node keeps what the operands reach on the
// host, for hosts laid out unlike the usual Linux distribution (GKE's
// Container-Optimized OS, Talos, a moved kubelet root). Each is at most
// 4096 bytes and holds no '..' segment; the kubelet's directory, which the
// device plugin mounts to write its socket, may not be / alone (the
// rootFS is / by default, and a driverInstallDir of / names the host's
// own driver at /, as the default does).
type HostPathsSpec struct {
	// RootFS is the host's root filesystem, which operands that run the
	// host's tools (containerd to read its config, modprobe, nvidia-smi)
	// mount read-only.
	// +kubebuilder:default="/"
	// +kubebuilder:validation:Pattern=`^/`
	// +kubebuilder:validation:MaxLength=4096
	// +kubebuilder:validation:XValidation:rule=`!self.matches('(^|/)[.][.](/|$)')`,message="must not hold a '..' segment: name the directory itself"
	// +optional
	RootFS string `json:"rootFS,omitempty"`
	// DriverInstallDir is where a driver the operator does not install
	// keeps its files, when not under the host's /: GKE's
	// Container-Optimized OS installs it in /home/kubernetes/bin/nvidia.
	// The driver container's own root is always /run/nvidia/driver, the
	// default, which leaves a host's driver at /.
	// +kubebuilder:default="/run/nvidia/driver"
	// +kubebuilder:validation:Pattern=`^/`
	// +kubebuilder:validation:MaxLength=4096
	// +kubebuilder:validation:XValidation:rule=`!self.matches('(^|/)[.][.](/|$)')`,message="must not hold a '..' segment: name the directory itself"
	// +optional
	DriverInstallDir string `json:"driverInstallDir,omitempty"`
	// KubeletRootDir is the kubelet's --root-dir: where its device plugin
	// and pod resources sockets are.
	// +kubebuilder:default="/var/lib/kubelet"
	// +kubebuilder:validation:Pattern=`^/`
	// +kubebuilder:validation:MaxLength=4096
	// +kubebuilder:validation:XValidation:rule=`!self.matches('(^|/)[.][.](/|$)')`,message="must not hold a '..' segment: name the directory itself"
	// +kubebuilder:validation:XValidation:rule=`!self.matches('^/+$')`,message="must not be / alone: the operands would write to the host's root; name a directory"
	// +optional
	KubeletRootDir string `json:"kubeletRootDir,omitempty"`
}

// The host paths' defaults, for a policy read without the API server's
// defaulting.
const (
	DefaultRootFS           = "/"
	DefaultDriverInstallDir = "/run/nvidia/driver"
	DefaultKubeletRootDir   = "/var/lib/kubelet"
	DefaultToolkitInstall   = "/usr/local/nvidia"
)

// HostRoot is the host's root filesystem.
func (s *ClusterPolicySpec) HostRoot() string { return orDefault(s.HostPaths.RootFS, DefaultRootFS) }

// KubeletRoot is the kubelet's root directory.
func (s *ClusterPolicySpec) KubeletRoot() string {
	return orDefault(s.HostPaths.KubeletRootDir, DefaultKubeletRootDir)
}

// ToolkitInstallDir is where the toolkit installs the NVIDIA runtime on
// the host, and the runtime's config names it.
func (s *ClusterPolicySpec) ToolkitInstallDir() string {
	return orDefault(s.Toolkit.InstallDir, DefaultToolkitInstall)
}

// DriverRootPath is where a node's driver keeps its files on the host: the
// driver container's root, or the host's own driver, at / unless
// hostPaths.driverInstallDir moves it. The host's / is / here even where
// hostPaths.rootFS names another tree to chroot into, as in NVIDIA's
// operator.
func (s *ClusterPolicySpec) DriverRootPath(r DriverRoot) string {
	if r != DriverRootHost {
		return DefaultDriverInstallDir
	}
	if dir := path.Clean(orDefault(s.HostPaths.DriverInstallDir, DefaultDriverInstallDir)); dir != DefaultDriverInstallDir {
		return dir
	}
	return "/"
}

func orDefault(v, def string) string {
	if v == "" {
		return def
	}
	return v
}
