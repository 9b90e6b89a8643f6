package maintenance

import (
	"sync"

	gpuv1 "github.com/gpu-operator/gpu-operator/api/v1"
	"github.com/gpu-operator/gpu-operator/internal/upgrade"
)

// tally counts the GPU nodes by where they stand in an upgrade; nodes
// step side by side.
type tally struct {
	mu                                           sync.Mutex
	pending, inProgress, done, failed, available int
}

// upgradeCounts is a tally's figures.
type upgradeCounts struct {
	pending, inProgress, done, failed, available int
}

func (t *tally) snapshot() upgradeCounts {
	t.mu.Lock()
	defer t.mu.Unlock()
	return upgradeCounts{t.pending, t.inProgress, t.done, t.failed, t.available}
}

func (t *tally) count(s gpuv1.UpgradeState) {
	t.mu.Lock()
	defer t.mu.Unlock()
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
func (r *Reconciler) export(cp *gpuv1.ClusterPolicy, t upgradeCounts) {
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
