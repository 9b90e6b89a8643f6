package registry

import (
	"maps"

	rbacv1 "k8s.io/api/rbac/v1"

	gpuv1 "github.com/gpu-operator/gpu-operator/api/v1"

	"github.com/gpu-operator/gpu-operator/internal/state"
	"github.com/gpu-operator/gpu-operator/internal/state/cudaworkload"
	"github.com/gpu-operator/gpu-operator/internal/state/dcgm"
	"github.com/gpu-operator/gpu-operator/internal/state/dcgmexporter"
	"github.com/gpu-operator/gpu-operator/internal/state/deviceplugin"
	"github.com/gpu-operator/gpu-operator/internal/state/dradriver"
	"github.com/gpu-operator/gpu-operator/internal/state/driver"
	"github.com/gpu-operator/gpu-operator/internal/state/gfd"
	"github.com/gpu-operator/gpu-operator/internal/state/migmanager"
	"github.com/gpu-operator/gpu-operator/internal/state/mps"
	"github.com/gpu-operator/gpu-operator/internal/state/nfd"
	"github.com/gpu-operator/gpu-operator/internal/state/toolkit"
)

// states is the order of the GPU node stack: each state after the states it
// needs ready on a node first.
//
// The container toolkit starts after the driver: with CDI it generates the
// node's device specs from the driver's files. It is not torn down when
// the driver is replaced (StartsAfter, not After): that would revert the
// runtime's config and restart the runtime twice; it writes the CDI spec
// for the new driver in place, and the states after the driver that use
// the spec (mig-manager, the MPS daemon, the device plugin) wait on the
// node until it has. mig-manager partitions the GPUs once both are
// ready, and the device plugin, the first state that hands out GPUs,
// waits for it: the device plugin, GFD and dcgm-exporter leave a node
// whose MIG devices are being reconfigured. mig-manager came after nodes
// were labelled, so a node without its label is not held back by it. The
// MPS control daemon runs before the device plugin on nodes that share
// GPUs with MPS: the plugin checks it is up when it starts.
//
// A node hands out its GPUs in one allocation mode: the device plugin
// (and the MPS daemon) run on nodes in mode device-plugin, NVIDIA's DRA
// driver on nodes in mode dra, never both. The DRA driver takes the
// device plugin's place after mig-manager: it reads the node's MIG
// devices only when it starts. dcgm-exporter and GFD come after both,
// of which one is disabled on each node. The DRA driver came after nodes
// were labelled, so a node without its label is not held back by it.
func states() []state.State {
	return []state.State{
		{Name: state.NodeFeatureDiscovery, Scope: state.ClusterWide, Operand: nfd.Operand{}},
		{Name: state.Driver, After: []state.Name{state.NodeFeatureDiscovery}, Operand: driver.Operand{}},
		{Name: state.ContainerToolkit, After: []state.Name{state.NodeFeatureDiscovery}, StartsAfter: []state.Name{state.Driver},
			Operand: toolkit.Operand{}},
		{Name: state.MIGManager, After: []state.Name{state.Driver, state.ContainerToolkit}, Operand: migmanager.Operand{},
			GatesOnlyWhenLabelled: true},
		{Name: state.MPSControlDaemon, After: []state.Name{state.Driver, state.ContainerToolkit, state.MIGManager}, Operand: mps.Operand{},
			Mode: gpuv1.AllocationDevicePlugin, GatesOnlyWhenLabelled: true},
		{Name: state.DevicePlugin, After: []state.Name{state.Driver, state.ContainerToolkit, state.MIGManager, state.MPSControlDaemon},
			Mode: gpuv1.AllocationDevicePlugin, Operand: deviceplugin.Operand{}},
		{Name: state.DRADriver, After: []state.Name{state.Driver, state.ContainerToolkit, state.MIGManager},
			Mode: gpuv1.AllocationDRA, Operand: dradriver.Operand{}, GatesOnlyWhenLabelled: true},
		// NVIDIA's order: the host engine after the device plugin, and
		// before the exporter that reads it. Added after nodes were
		// labelled: unlabelled, it gates nothing.
		{Name: state.DCGM, After: []state.Name{state.DevicePlugin, state.DRADriver}, Operand: dcgm.Operand{}, GatesOnlyWhenLabelled: true},
		{Name: state.DCGMExporter, After: []state.Name{state.DevicePlugin, state.DRADriver, state.DCGM}, Operand: dcgmexporter.Operand{}},
		{Name: state.GPUFeatureDiscovery, After: []state.Name{state.DevicePlugin, state.DRADriver}, Operand: gfd.Operand{}},
		// The last word on a node: a CUDA program runs there, given its
		// GPU as workloads are, by the device plugin or the DRA driver,
		// whichever serves the node. Nothing waits for it but the
		// readiness taint, which waits for every state; added after nodes
		// were labelled, so unlabelled it gates nothing.
		{Name: state.CUDAWorkload, After: []state.Name{state.DevicePlugin, state.DRADriver},
			Operand: cudaworkload.Operand{}, GatesOnlyWhenLabelled: true},
	}
}

// Graph returns the validated state graph.
func Graph() (*state.Graph, error) { return state.NewGraph(states()...) }

// The operator's bind of the operands' ClusterRoles (ClusterRules), and its
// bindings of them, which it changes and deletes by name only: no one
// else's ClusterRoleBinding (create, list and watch take no names).
// +kubebuilder:rbac:groups=rbac.authorization.k8s.io,resources=clusterrolebindings,verbs=list;watch;create
// +kubebuilder:rbac:groups=rbac.authorization.k8s.io,resources=clusterrolebindings,verbs=get;patch;delete,resourceNames=gpu-operator:compute-domain-daemon-service-account-binding;gpu-operator:nfd-gc-binding;gpu-operator:nfd-master-binding;gpu-operator:nvidia-dra-driver-controller-binding;gpu-operator:nvidia-dra-driver-kubeletplugin-binding;gpu-operator:nvidia-mig-manager-binding
// +kubebuilder:rbac:groups=rbac.authorization.k8s.io,resources=clusterroles,verbs=bind,resourceNames=gpu-operator:compute-domain-daemon-service-account;gpu-operator:nfd-gc;gpu-operator:nfd-master;gpu-operator:nvidia-dra-driver-controller;gpu-operator:nvidia-dra-driver-kubeletplugin;gpu-operator:nvidia-mig-manager

// ClusterRules are the cluster-wide rules of the operands that act on
// cluster-wide objects, by ServiceAccount name: NFD's master and garbage
// collector, mig-manager, which labels its node, and the DRA driver's
// kubelet plugin, compute-domain controller and IMEX daemons. The chart,
// kustomize config and OLM bundle ship them as ClusterRoles named
// render.OperandClusterRoleName (make manifests), since the operator does
// not hold them to grant. The operator binds each while its operand runs,
// which needs bind on those ClusterRoles alone (the markers above, which
// TestOperatorBindsOnlyTheOperandClusterRoles keeps to ClusterRules); OLM
// binds them at install.
func ClusterRules() map[string][]rbacv1.PolicyRule {
	rules := nfd.ClusterRules()
	rules[migmanager.ServiceAccountName] = migmanager.ClusterRules()
	maps.Copy(rules, dradriver.ClusterRules())
	return rules
}
