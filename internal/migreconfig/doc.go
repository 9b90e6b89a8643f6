// Package migreconfig is the state machine of a node's MIG
// reconfiguration, on the node label nvidia.com/gpu-mig-reconfigure-state:
// a pure transition table and the budget that admits nodes to it. The
// upgrade controller gathers the facts and takes the steps.
package migreconfig
