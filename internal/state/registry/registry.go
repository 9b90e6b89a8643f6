package registry

import (
	"github.com/gpu-operator/gpu-operator/internal/state"
	"github.com/gpu-operator/gpu-operator/internal/state/dcgmexporter"
	"github.com/gpu-operator/gpu-operator/internal/state/deviceplugin"
	"github.com/gpu-operator/gpu-operator/internal/state/driver"
	"github.com/gpu-operator/gpu-operator/internal/state/gfd"
	"github.com/gpu-operator/gpu-operator/internal/state/nfd"
	"github.com/gpu-operator/gpu-operator/internal/state/toolkit"
)

// states is the order of the GPU node stack: each state after the states it
// needs ready on a node first.
//
// The container toolkit does not wait for the driver: it installs the
// NVIDIA runtime and configures the node's container runtime, which needs
// nothing of the driver but the node's driver root, known from its labels
// (the NVIDIA runtime runs runc unchanged until the nvidia module is
// loaded). Kept off the driver's chain, it is not torn down when a driver
// is replaced, which would revert the runtime's config and restart the
// runtime twice. The device plugin is the first state that uses both.
func states() []state.State {
	return []state.State{
		{Name: state.NodeFeatureDiscovery, Scope: state.ClusterWide, Operand: nfd.Operand{}},
		{Name: state.Driver, After: []state.Name{state.NodeFeatureDiscovery}, Operand: driver.Operand{}},
		{Name: state.ContainerToolkit, After: []state.Name{state.NodeFeatureDiscovery}, Operand: toolkit.Operand{}},
		{Name: state.DevicePlugin, After: []state.Name{state.Driver, state.ContainerToolkit}, Operand: deviceplugin.Operand{}},
		{Name: state.DCGMExporter, After: []state.Name{state.DevicePlugin}, Operand: dcgmexporter.Operand{}},
		{Name: state.GPUFeatureDiscovery, After: []state.Name{state.DevicePlugin}, Operand: gfd.Operand{}},
	}
}

// Graph returns the validated state graph.
func Graph() (*state.Graph, error) { return state.NewGraph(states()...) }
