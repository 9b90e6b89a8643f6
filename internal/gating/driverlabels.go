package gating

import (
	gpuv1 "github.com/gpu-operator/gpu-operator/api/v1"
	"github.com/gpu-operator/gpu-operator/internal/state"
)

// driverPool is the pool label the node carries: the policy's pool for
// it, except while a running driver pod of the pool the label names stays
// until its upgrade replaces it. The label gates each pool's DaemonSet, so
// moving it earlier would make the DaemonSet controller delete the running
// driver at once, with no cordon, no eviction and no budget.
func (d *decision) driverPool() string {
	return d.moved(gpuv1.LabelDriverPool, d.in.DriverPool)
}

// driverKernel is the kernel label the node carries in a precompiled pool,
// moved by the same rule as the pool label: it gates the pool's per-kernel
// DaemonSets, and a node booted into a new kernel gets that kernel's
// driver through the upgrade. It says what the node's driver runs, so it
// moves with the pool label (pool, as decided), never before it.
func (d *decision) driverKernel(pool string) string {
	if pool != d.in.DriverPool {
		return d.in.Node.Labels[gpuv1.LabelDriverKernel]
	}
	return d.moved(gpuv1.LabelDriverKernel, d.in.DriverKernel)
}

// moved returns the value a label that gates the node's driver DaemonSet
// takes: want, unless a running driver pod of the DaemonSet its current
// value selects stays until the upgrade replaces it. Moving the label
// earlier would make the DaemonSet controller delete the running driver at
// once, with no cordon, no eviction and no budget.
func (d *decision) moved(key, want string) string {
	cur := d.in.Node.Labels[key]
	switch {
	case cur == "" || cur == want:
	case d.in.Pods[state.Driver] == nil && !d.in.DriverUnloading && !d.driverKeptInPlace():
		// No driver to keep: nothing runs, or it failed to start. A
		// driver restarting in place keeps its modules loaded: it runs.
	case d.driverUpgrading():
		// The upgrade replaces the driver now: its new pod is the new
		// DaemonSet's. A repair's reload is not an upgrade: it keeps it.
	default:
		return cur
	}
	return want
}
