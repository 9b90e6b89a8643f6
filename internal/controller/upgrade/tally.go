package upgrade

import (
	gpuv1 "github.com/gpu-operator/gpu-operator/api/v1"
	"github.com/gpu-operator/gpu-operator/internal/upgrade"
)

// tally counts the GPU nodes by where they stand in an upgrade.
type tally struct {
	pending, inProgress, done, failed, available int
}

func (t *tally) count(s gpuv1.UpgradeState) {
	switch {
	case s == gpuv1.UpgradeRequired:
		t.pending++
	case upgrade.InProgress(s):
		t.inProgress++
	case s == gpuv1.UpgradeFailed:
		t.failed++
	case s == gpuv1.UpgradeDone:
		t.done++
		t.available++
	default:
		t.available++
	}
}

// export publishes the tally as gpu_operator_nodes_upgrades_* metrics.
func (r *Reconciler) export(cp *gpuv1.ClusterPolicy, t tally) {
	auto := 0.0
	if p := cp.Spec.Driver.UpgradePolicy.AutoUpgrade; p == nil || *p {
		auto = 1
	}
	m := r.Metrics
	m.AutoUpgradeEnabled.Set(auto)
	m.UpgradesPending.Set(float64(t.pending))
	m.UpgradesInProgress.Set(float64(t.inProgress))
	m.UpgradesDone.Set(float64(t.done))
	m.UpgradesFailed.Set(float64(t.failed))
	m.UpgradesAvailable.Set(float64(t.available))
}
