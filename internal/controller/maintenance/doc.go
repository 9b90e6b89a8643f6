// Package maintenance is the controller of the operations that take GPU
// nodes out of service: driver upgrades (internal/upgrade), MIG
// reconfigurations (internal/migreconfig) and repairs
// (internal/remediation). For the active policy it looks at the whole
// fleet, asks the arbiter (internal/arbiter) which operation may start or
// go on where, within the budgets, and steps each node's machines one
// step, taking each step's action (cordon, evict GPU pods, replace a pod,
// uncordon). The machines' states live on the nodes, so a restart resumes
// where it stopped.
package maintenance
