// Package remediation is the repair of a GPU node with unhealthy GPUs as a
// pure transition table: from where a node stands (its
// nvidia.com/gpu-remediation-state label) and what is observed about it,
// the next state and the one action to take. It also admits nodes within
// the budget the repairs share with driver upgrades.
package remediation
