package v1

// The node label contract. These labels are the operator's public interface:
// anyone can read them (`kubectl get nodes -L nvidia.com/gpu.state.driver`),
// and the operand DaemonSets select nodes by them.
const (
	// LabelGPUPresent marks a GPU node. The operator sets it from NFD's PCI
	// labels; a user may set it to "true" on a node NFD does not see, or to
	// any other value to keep the operator off a node.
	LabelGPUPresent = "nvidia.com/gpu.present"

	// DeployLabelPrefix + operand ("driver", "container-toolkit", ...) says
	// whether the operand may run on the node. The operator sets "true"
	// where the label is absent and never overwrites a user's value.
	DeployLabelPrefix = "nvidia.com/gpu.deploy."

	// LabelDeployOperands set to "false" opts the node out of every operand.
	LabelDeployOperands = DeployLabelPrefix + "operands"

	// StateLabelPrefix + state says where the node stands for that state;
	// its value is a StateValue.
	StateLabelPrefix = "nvidia.com/gpu.state."

	// OperatorAnnotationPrefix starts the annotations the operator keeps on
	// nodes for itself, such as the last boot ID it saw.
	OperatorAnnotationPrefix = "nvidia.com/gpu-operator."

	// LabelAllocationMode is how a GPU node serves its GPUs, as the
	// operator writes it: device-plugin, dra, or none while a switch
	// between the two has taken one plugin off and not started the other.
	// The device plugin runs only where it is not dra or none (a node
	// labelled before modes existed keeps its plugin), the DRA driver only
	// where it is dra: never both on one node.
	LabelAllocationMode = "nvidia.com/gpu.allocation-mode"

	// LabelDriverPool names the driver node pool of a GPU node: a pool of
	// driver.nodePools, or "default".
	LabelDriverPool = "nvidia.com/gpu.driver-pool"

	// LabelDriverOwner names, under driver.useNvidiaDriverCRD, the
	// NVIDIADriver whose driver the node runs: NVIDIA's label, which its
	// users select a driver's nodes by (kubectl get nodes -l
	// nvidia.com/gpu-operator.driver.owner=default). It moves with
	// LabelDriverPool, whose value it is, and is absent otherwise.
	LabelDriverOwner = "nvidia.com/gpu-operator.driver.owner"
	// LabelDriverKernel is, on a node of a precompiled driver pool, the
	// kernel version whose precompiled driver image the node runs: NFD's
	// kernel-version.full value, written by the operator and moved only by
	// the upgrade, so that a node booted into a new kernel gets its new
	// driver through the upgrade. It gates the pool's per-kernel
	// DaemonSets.
	LabelDriverKernel = "nvidia.com/gpu.driver-kernel"
	// LabelDriverVersion is the driver version ready on the node (a digest
	// is written sha256-<hex>, as label values cannot hold a colon).
	LabelDriverVersion = "nvidia.com/gpu.driver-version"

	// LabelDriverRoot says where the node's NVIDIA driver lives, as the
	// operator decided it: a DriverRoot. The operands that load the driver's
	// libraries or device nodes run one DaemonSet per driver root, selected
	// by this label.
	LabelDriverRoot = "nvidia.com/gpu.driver-root"
	// LabelContainerRuntime is the node's container runtime as its kubelet
	// reports it (containerd, crio or docker); the container toolkit runs
	// one DaemonSet per runtime, selected by this label.
	LabelContainerRuntime = "nvidia.com/gpu.container-runtime"
	// AnnotationHostDriver is set by the operator on a node whose host
	// already runs an NVIDIA driver, found by the driver pod's check; its
	// value says what was found. The node then uses the host's driver and
	// does not get the driver container again for as long as the operator
	// manages it (like every operator label, it goes when the node stops
	// being a GPU node or the ClusterPolicy is deleted, and the check runs
	// again after). Remove it after removing the host's driver to have the
	// driver container deployed again.
	AnnotationHostDriver = OperatorAnnotationPrefix + "host-driver"

	// LabelUpgradeState is where the node stands in a driver upgrade; its
	// value is an UpgradeState.
	LabelUpgradeState = "nvidia.com/gpu-driver-upgrade-state"
	// LabelUpgradeSkip set to "true" keeps the node out of driver upgrades.
	LabelUpgradeSkip = "nvidia.com/gpu-driver-upgrade.skip"
	// UpgradeAnnotationPrefix starts the annotations the driver upgrade
	// keeps on nodes, apart from the node controller's.
	UpgradeAnnotationPrefix = "nvidia.com/gpu-driver-upgrade."
)

// DriverRoot is where a node's driver lives.
type DriverRoot string

// Driver roots.
const (
	// DriverRootContainer: the operator's driver container loads the
	// driver and mounts its files at /run/nvidia/driver on the host.
	DriverRootContainer DriverRoot = "container"
	// DriverRootHost: the driver is installed on the host, at /. This is
	// the case when the driver is disabled in the policy, opted out on the
	// node (nvidia.com/gpu.deploy.driver set to anything but true, such as
	// pre-installed), or found on the host.
	DriverRootHost DriverRoot = "host"
)

// DefaultDriverPool is the pool of GPU nodes matching no driver.nodePools.
const DefaultDriverPool = "default"

// UpgradeState is a step of a node's driver upgrade.
type UpgradeState string

// The steps of a driver upgrade, in order, as NVIDIA GPU Operator users know
// them.
const (
	UpgradeRequired       UpgradeState = "upgrade-required"
	UpgradeCordonRequired UpgradeState = "cordon-required"
	UpgradeWaitForJobs    UpgradeState = "wait-for-jobs-required"
	UpgradePodDeletion    UpgradeState = "pod-deletion-required"
	UpgradeDrainRequired  UpgradeState = "drain-required"
	UpgradePodRestart     UpgradeState = "pod-restart-required"
	UpgradeValidation     UpgradeState = "validation-required"
	UpgradeUncordon       UpgradeState = "uncordon-required"
	UpgradeDone           UpgradeState = "upgrade-done"
	UpgradeFailed         UpgradeState = "upgrade-failed"
)

// LabelTrue is the value of a set boolean label.
const LabelTrue = "true"

// StateValue is the value of a nvidia.com/gpu.state.<state> label.
type StateValue string

// Values of the per-node state labels.
const (
	// StatePending: the state is on its way on this node, or waits for the
	// states before it.
	StatePending StateValue = "pending"
	// StateReady: the state's pod on this node is Ready and runs the
	// desired spec; the states after it may start.
	StateReady StateValue = "ready"
	// StateFailed: the state's pod on this node crash-loops, cannot pull its
	// image, or stayed not Ready past the grace period.
	StateFailed StateValue = "failed"
	// StateUpgrading: the node's driver is being replaced; the state's pod
	// is kept off the node until the new driver is ready.
	StateUpgrading StateValue = "upgrading"
	// StateDisabled: the operand is disabled in the policy or opted out on
	// this node (deploy label not "true"); the states after it proceed.
	StateDisabled StateValue = "disabled"
)

// Up says whether the states after this one may proceed on its node: it is
// ready, or disabled. A node is done rolling out when every per-node state
// is up on it; the operator, its status and the benchmark all judge it
// through this one method.
func (v StateValue) Up() bool { return v == StateReady || v == StateDisabled }

// DeployLabel returns the deploy label of an operand.
func DeployLabel(operand string) string { return DeployLabelPrefix + operand }

// StateLabel returns the state label of a state.
func StateLabel(state string) string { return StateLabelPrefix + state }

// The readiness taint (spec.operator.readinessTaint).
const (
	// TaintGPUNotReady is the key of the NoSchedule taint the operator
	// keeps on a GPU node until every enabled state is ready there.
	TaintGPUNotReady = "nvidia.com/gpu.not-ready"
	// TaintGPUNotReadyValue is the value of the operator's taint: it marks
	// the taint as the operator's, the one it may remove, in the same
	// write that adds it. A taint of the key with another value is left
	// alone.
	TaintGPUNotReadyValue = "gpu-operator"
)

// LabelGPUClique is GPU feature discovery's NVLink domain of a node's
// GPUs, <cluster UUID>.<clique ID>: the nodes of one GB200 NVL72 rack
// share it (k8s-device-plugin v0.20.0, internal/lm/imex.go). The
// maintenance budget can cap the domains disrupted at once.
const LabelGPUClique = "nvidia.com/gpu.clique"

// MaintenanceAnnotationPrefix starts the annotations every node operation
// shares (driver upgrades, MIG reconfigurations, repairs).
const MaintenanceAnnotationPrefix = "nvidia.com/gpu-maintenance."

const (
	// AnnotationMaintenanceWaiting says why an operation that wants to
	// start on the node waits: the holder table's reason, or the budget
	// that is full. Absent when none waits.
	AnnotationMaintenanceWaiting = MaintenanceAnnotationPrefix + "waiting"
	// AnnotationNVLinkDomain is the node's NVLink domain (LabelGPUClique)
	// while an operation holds it: GPU feature discovery's label goes
	// with its pod, which the operation may take off the node.
	AnnotationNVLinkDomain = MaintenanceAnnotationPrefix + "nvlink-domain"
	// AnnotationMaintenancePool is the driver pool a node was taken under
	// while an operation holds it: the node counts in that pool's budgets
	// and keeps its timeouts and eviction settings until it is let go,
	// whatever NVIDIADriver selects it meanwhile.
	AnnotationMaintenancePool = MaintenanceAnnotationPrefix + "pool"
)

// AnnotationServed is set on a GPU node once its device plugin has been
// ready there: a MIG configuration requested later waits for its turn
// with the node serving its GPUs as they are, whatever takes the device
// plugin off meanwhile (a driver reload), while a node that never served
// starts its GPU stack on the new layout.
const AnnotationServed = OperatorAnnotationPrefix + "served"

// AnnotationUnhealthyGPUs is how many of a GPU node's GPUs its device plugin
// reports unhealthy (the node's allocatable GPU resources below their
// capacity), set by the operator while there are any.
const AnnotationUnhealthyGPUs = OperatorAnnotationPrefix + "unhealthy-gpus"

// The remediation contract (spec.operator.remediation).
const (
	// LabelRemediationState is where the node stands in the repair of its
	// unhealthy GPUs; its value is a RemediationState.
	LabelRemediationState = "nvidia.com/gpu-remediation-state"
	// RemediationAnnotationPrefix starts the annotations the remediation
	// keeps on nodes.
	RemediationAnnotationPrefix = "nvidia.com/gpu-remediation."
	// AnnotationRemediationApproved set to "true" by a person lets a
	// node's repair start when spec.operator.remediation.autoStart is
	// false, or starts a failed or reboot-required node's repair again.
	// The operator removes it when the repair starts.
	AnnotationRemediationApproved = RemediationAnnotationPrefix + "approved"
	// TaintGPUUnhealthy is the key of the NoSchedule taint the operator
	// keeps on a node from the start of its repair until its GPUs are
	// healthy again. Its value is TaintGPUNotReadyValue, the operator's.
	TaintGPUUnhealthy = "nvidia.com/gpu.unhealthy"
)

// RemediationState is a step of a node's repair.
type RemediationState string

// The steps of a repair, in order.
const (
	// RemediationRequired: the node's GPUs are unhealthy; it waits for the
	// budget, or for an approval when autoStart is false.
	RemediationRequired RemediationState = "remediation-required"
	// RemediationEviction: the node is tainted and its GPU pods evicted.
	RemediationEviction RemediationState = "eviction-required"
	// RemediationDevicePluginRestart: the device plugin is restarted,
	// which clears a GPU it marked unhealthy for good.
	RemediationDevicePluginRestart RemediationState = "device-plugin-restart-required"
	// RemediationDriverReload: the driver pod is replaced, as a driver
	// upgrade replaces it: the operands after it leave the node first.
	RemediationDriverReload RemediationState = "driver-reload-required"
	// RemediationValidation: waiting for the GPU stack to be ready again
	// with every GPU allocatable.
	RemediationValidation RemediationState = "validation-required"
	// RemediationDone: the node's GPUs are healthy again, its taint gone.
	RemediationDone RemediationState = "remediation-done"
	// RemediationRebootRequired: nothing the operator can do healed the
	// GPUs; the node keeps its taint until it reboots, then is validated.
	RemediationRebootRequired RemediationState = "reboot-required"
	// RemediationFailed: the repair could not go on (GPU pods that would
	// not leave, GPUs still unhealthy after a reboot); the node keeps its
	// taint until a person acts.
	RemediationFailed RemediationState = "remediation-failed"
)

// The device plugin configuration contract (spec.devicePlugin.config).
const (
	// LabelDevicePluginConfig, set by a person (the NVIDIA GPU Operator's
	// label), names the configuration of devicePlugin.config's ConfigMap
	// the node runs, over its pool's and the policy's default.
	LabelDevicePluginConfig = "nvidia.com/device-plugin.config"
	// LabelDevicePluginConfigInUse is the configuration the operator runs
	// on the node, where it is not devicePlugin.config.default: the device
	// plugin and GFD run one DaemonSet per configuration in use, selected
	// by it. Absent: the default.
	LabelDevicePluginConfigInUse = "nvidia.com/gpu.device-plugin-config"
)
