// Package upgrade is the driver-upgrade state machine as a pure transition
// table: from where a node stands (its nvidia.com/gpu-driver-upgrade-state
// label) and what is observed about it, the next state and the one action
// to take. It also computes the upgrade budget of a node pool.
package upgrade
