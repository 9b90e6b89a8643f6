// Package upgrade is the driver-upgrade controller: for the active policy it
// walks every GPU node one step through the upgrade state machine of
// internal/upgrade, within each pool's budget, taking the step's action
// (cordon, evict GPU pods, drain, replace the driver pod, uncordon). Its
// state lives on the nodes, so a restart resumes where it stopped.
package upgrade
