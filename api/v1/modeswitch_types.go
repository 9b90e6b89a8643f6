package v1

// Labels, annotations and the taint of a node's allocation mode switch:
// the maintenance operation that moves a node that serves GPUs from one
// allocation mode to its pool's other, its GPU pods evicted first.
const (
	// LabelModeSwitchState is where the node stands in its allocation
	// mode switch; its value is a ModeSwitchState.
	LabelModeSwitchState = "nvidia.com/gpu-allocation-mode-switch-state"
	// ModeSwitchAnnotationPrefix starts the annotations the switch keeps
	// on nodes.
	ModeSwitchAnnotationPrefix = "nvidia.com/gpu-allocation-mode-switch."
	// AnnotationModeSwitchHold is the allocation mode the node's
	// LabelAllocationMode carries while the switch holds it: none while
	// one plugin leaves and its ResourceSlices go, then the mode the
	// switch moves to. The node controller writes the label from it;
	// absent when the switch holds the node's mode no more.
	AnnotationModeSwitchHold = ModeSwitchAnnotationPrefix + "mode"
	// AnnotationModeSwitchReason says why the node's switch failed.
	AnnotationModeSwitchReason = ModeSwitchAnnotationPrefix + "reason"
	// TaintModeSwitching is the key of the NoSchedule taint the operator
	// keeps on a node from the eviction of its GPU pods until the plugin
	// of its new mode serves its GPUs. Its value is TaintGPUNotReadyValue,
	// the operator's.
	TaintModeSwitching = "nvidia.com/gpu.allocation-mode-switching"
)

// ModeSwitchState is a step of a node's allocation mode switch.
type ModeSwitchState string

// The steps of a switch, in order.
const (
	// ModeSwitchRequired: the node serves GPUs in another mode than its
	// pool's; it waits for the budget.
	ModeSwitchRequired ModeSwitchState = "switch-required"
	// ModeSwitchEviction: the node is tainted and its GPU pods evicted.
	ModeSwitchEviction ModeSwitchState = "eviction-required"
	// ModeSwitchPluginsOff: the node's mode is none: the plugin it
	// served with leaves, and its ResourceSlices are deleted.
	ModeSwitchPluginsOff ModeSwitchState = "plugins-off-required"
	// ModeSwitchPluginOn: the node's mode is the new one: waiting for its
	// plugin to serve the GPUs.
	ModeSwitchPluginOn ModeSwitchState = "plugin-on-required"
	// ModeSwitchDone: the node serves its GPUs in its pool's mode, the
	// taint gone.
	ModeSwitchDone ModeSwitchState = "switch-done"
	// ModeSwitchFailed: the switch could not go on; the node keeps its
	// taint until its pool's mode changes or a person removes this label,
	// which starts the switch over.
	ModeSwitchFailed ModeSwitchState = "switch-failed"
)
