package gating

import (
	"time"

	corev1 "k8s.io/api/core/v1"

	gpuv1 "github.com/gpu-operator/gpu-operator/api/v1"
	"github.com/gpu-operator/gpu-operator/internal/draslices"
	"github.com/gpu-operator/gpu-operator/internal/state"
	"github.com/gpu-operator/gpu-operator/internal/state/cudaworkload"
)

// Input is what Decide judges one node from.
type Input struct {
	Graph *state.Graph
	Node  *corev1.Node
	// Policy is the active ClusterPolicy; nil when there is none, in which
	// case every label the operator set is to be removed.
	Policy *gpuv1.ClusterPolicy
	// Enabled says which states the policy deploys.
	Enabled map[state.Name]bool
	// Pods holds each state's pod on the node; nil or absent when none.
	Pods map[state.Name]*state.PodFacts
	// DriverUnloading is true while a driver pod on the node terminates
	// that does not restart in place: its driver is being unloaded,
	// whatever pod replaces it.
	DriverUnloading bool
	// DriverRestartDigest is the configuration digest of a driver pod on
	// the node that restarts in place: it terminates with the digest its
	// DaemonSet's template still has (inplace.go); empty when none does.
	DriverRestartDigest string
	// DriverRestartGrace is how long a ready driver state survives a
	// restart in place (timers.DriverRestartGrace).
	DriverRestartGrace time.Duration
	// DriverPool is the node's driver pool under the policy. The node's
	// pool label moves there only once no driver of the old pool runs on
	// the node, or when its upgrade replaces the driver.
	DriverPool string
	// DriverPoolsFromNVIDIADrivers is true under driver.useNvidiaDriverCRD:
	// a pool is an NVIDIADriver of its name, which NVIDIA's owner label
	// names on the node.
	DriverPoolsFromNVIDIADrivers bool
	// DriverNeedsOS is true when the pool's driver image tag names the OS
	// (a version rather than a digest): a node whose OS NFD has not
	// labelled gets no driver DaemonSet.
	DriverNeedsOS bool
	// DriverKernel is, in a precompiled pool, the kernel whose image the
	// node's driver should run (its nvidia.com/gpu.driver-kernel label),
	// moved like the pool label; "" outside precompiled pools.
	// DriverAwaitsImage says why the node's precompiled driver cannot
	// start yet (its kernel's image missing or being checked); a node with
	// no driver pod says so in its driver state, failed when the image is
	// missing (DriverImageMissing).
	DriverKernel, DriverAwaitsImage string
	DriverImageMissing              bool
	// DevicePluginConfigs are the configurations devicePlugin.config's
	// ConfigMap holds, each with why the operator cannot run it ("" when
	// it can); nil when it could not be read, and then a node keeps the
	// configuration it runs.
	DevicePluginConfigs map[string]string
	// MPSConfigs are the configurations nodes run that share GPUs with
	// MPS: a node running one runs the MPS control daemon.
	MPSConfigs map[string]bool
	// KeptDevicePluginConfigs are the configurations whose file in that
	// ConfigMap is broken or gone, and whose last good copy, which the
	// operator keeps, nodes run (pluginconfig.ValidatedConfigMap).
	KeptDevicePluginConfigs map[string]bool
	// CopiedDevicePluginConfigs are the configurations the validated
	// ConfigMap holds: the pods can read only those, so a node moves to a
	// configuration only once it is there.
	CopiedDevicePluginConfigs map[string]bool
	// GPUPods counts the pods holding GPUs on the node, where its device
	// plugin configuration is to change; 0 when not counted.
	GPUPods int
	// Grace is how long a ready state survives its pod being not ready or
	// gone (timers.ReadyGrace).
	Grace time.Duration
	// NFDGrace is how long a GPU node whose NFD labels went stays one:
	// NFD's labels flap (an nfd-master restart), and every operation in
	// flight on the node would end with them.
	NFDGrace time.Duration
	// HealthSettle is how long the device plugin's pod must have been
	// ready before its word on the GPUs counts: the kubelet reports
	// allocatable again on its next status update after the plugin
	// registers (timers.HealthSettle).
	HealthSettle time.Duration
	// AllocationMode is the mode of the node's driver pool; empty when no
	// pool holds the node, which then keeps the mode it has.
	AllocationMode gpuv1.AllocationMode
	// GPUCluster names the GPUCluster that set every pool's mode to dra,
	// if one did, for the messages to say.
	GPUCluster string
	// DRAServed says whether the API server serves resource.k8s.io/v1
	// ResourceSlices, which the DRA driver publishes.
	DRAServed bool
	// DRADynamicMIG is true where the DRA driver in force makes MIG
	// devices itself (its DynamicMIG gate): mig-manager does not run on
	// nodes in allocation mode dra then.
	DRADynamicMIG bool
	// DRA is what the node's ResourceSlices of NVIDIA's DRA driver say;
	// nil when it has none.
	DRA *draslices.Node
	// WorkloadRetry is how long after a CUDA workload pod ended, failed
	// or not run, a new one tries again (timers.WorkloadRetry).
	WorkloadRetry time.Duration
	// GPUPodsRecheck is how often a node whose configuration change waits
	// for its GPU pods looks again: the node controller does not watch
	// them (timers.GPUPodsRecheck).
	GPUPodsRecheck time.Duration
	Now            time.Time
}

// Event is something worth telling a person about the node.
type Event struct {
	Warning bool
	Reason  string
	Message string
}

// Result is what the operator wants on the node.
type Result struct {
	// Labels is every label the operator wants on the node. Applied with
	// server-side apply, labels the operator set before and that are not
	// here are removed; labels of users are never touched.
	Labels map[string]string
	// Annotations is every bookkeeping annotation the operator wants.
	Annotations map[string]string
	// Events to record once the labels are written.
	Events []Event
	// StalePods are states whose pod has been ready since before the state
	// was reset and did not restart within the grace period; deleting the
	// pod makes the DaemonSet controller start a fresh one.
	StalePods []state.Name
	// RequeueAfter is when a grace period ends; zero when none runs.
	RequeueAfter time.Duration
	// BecameReady is true when every state turned ready or disabled in this
	// decision; ReadyAfter is then how long since discovery it took.
	BecameReady bool
	ReadyAfter  time.Duration
	// Why says, for each state that is not ready, why not: what it waits
	// for, or which proof of function fails.
	Why map[state.Name]string
	// Workload is the CUDA workload pod the node is to run, nil when none
	// is to be made: the proof of the node's current generation exists
	// (or is not due yet), or the state waits for its prerequisites.
	Workload *cudaworkload.Request
	// ReadinessTaint is true when the node is to carry the readiness taint
	// (gpuv1.TaintGPUNotReady): the policy asks for it and a state enabled
	// there is not ready.
	ReadinessTaint bool
}
