// Package modeswitch is the state machine of a node's allocation mode
// switch, on the node label nvidia.com/gpu-allocation-mode-switch-state:
// a pure transition table that moves a node serving GPUs from the device
// plugin to NVIDIA's DRA driver, or back, its GPU pods evicted first and
// never both plugins on the node. The maintenance controller gathers the
// facts and takes the steps; the arbiter admits nodes to it.
package modeswitch
