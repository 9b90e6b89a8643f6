package dradriver

// Names users know from NVIDIA's GPU Operator (manifests/state-dra-driver
// at v26.7.0).
const (
	// KubeletPluginName names the kubelet plugin DaemonSet.
	KubeletPluginName = "nvidia-dra-driver-kubelet-plugin"
	// ControllerName names the compute-domain controller Deployment, its
	// ServiceAccount, Role and ClusterRole.
	ControllerName = "nvidia-dra-driver-controller"
	// KubeletPluginServiceAccount runs the kubelet plugin.
	KubeletPluginServiceAccount = "nvidia-dra-driver-kubeletplugin"
	// ComputeDomainDaemonServiceAccount runs the IMEX daemons the
	// controller starts for each ComputeDomain.
	ComputeDomainDaemonServiceAccount = "compute-domain-daemon-service-account"
	// ControllerPodState is the state label of the controller's pods,
	// which belong to no per-node state.
	ControllerPodState = "dra-driver-controller"
	// GPUContainer and ComputeDomainContainer are the kubelet plugin's
	// containers.
	GPUContainer           = "gpus"
	ComputeDomainContainer = "compute-domains"
)

// The DRA drivers the plugin registers (cmd/gpu-kubelet-plugin/main.go
// and cmd/compute-domain-kubelet-plugin/main.go: DriverName).
const (
	GPUDriverName           = "gpu.nvidia.com"
	ComputeDomainDriverName = "compute-domain.nvidia.com"
)
