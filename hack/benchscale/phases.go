package main

import (
	"context"
	"fmt"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	gpuv1 "github.com/gpu-operator/gpu-operator/api/v1"
	"github.com/gpu-operator/gpu-operator/internal/state"
	"github.com/gpu-operator/gpu-operator/internal/test/simcluster"
)

// window is a phase's span, for counting the requests sent in it: from its
// start until settle after it was done.
type window struct{ from, to time.Time }

// rebootPhase reboots every k-th node and times until their chains have
// re-formed.
func rebootPhase(ctx context.Context, cfg config, s *simcluster.Cluster, nodes *nodeTracker, names []string, graph *state.Graph, r *Result) (window, error) {
	var rebooted []string
	for i := 0; i < len(names) && len(rebooted) < cfg.rebooted; i += max(1, len(names)/cfg.rebooted) {
		rebooted = append(rebooted, names[i])
	}
	progress(cfg.log, "rebooting %d nodes", len(rebooted))
	nodes.setGoal(upAfterReset(graph))
	start := time.Now()
	if err := reboot(ctx, s.Clientset, rebooted); err != nil {
		return window{}, err
	}
	done, err := nodes.wait(ctx, rebooted, cfg.limit(15*time.Minute))
	if err != nil {
		return window{}, fmt.Errorf("reboot: %w", err)
	}
	r.RebootedNodes = len(rebooted)
	r.RebootRecoverySeconds = done.Sub(start).Seconds()
	progress(cfg.log, "rebooted nodes ready again after %.1fs", r.RebootRecoverySeconds)
	sleepUntil(ctx, done.Add(settle))
	return window{start, done.Add(settle)}, nil
}

// upgradePhase changes driver.version and times the fleet upgrade.
func upgradePhase(ctx context.Context, cfg config, s *simcluster.Cluster, nodes *nodeTracker, names []string, graph *state.Graph, r *Result) (window, error) {
	r.UpgradeParallel = maxParallel(cfg.nodes)
	progress(cfg.log, "upgrading the driver to %s, %d nodes at a time", upgradedVersion, r.UpgradeParallel)
	nodes.setGoal(upgraded(graph, upgradedVersion))
	start := time.Now()
	nodes.upgradingFrom(start)
	patch := fmt.Sprintf(`{"spec":{"driver":{"version":%q}}}`, upgradedVersion)
	cp := &gpuv1.ClusterPolicy{ObjectMeta: metav1.ObjectMeta{Name: policyName}}
	if err := s.Client.Patch(ctx, cp, client.RawPatch("application/merge-patch+json", []byte(patch))); err != nil {
		return window{}, err
	}
	// A minute of the upgrade, or less in a small run, shows where the
	// operator's time goes while nodes wait for their steps.
	cfg.cpuProfiles.save(ctx, cfg.log, cfg.ws.listen().Pprof, cfg.ws.profiles(), "cpu-upgrade.pprof", min(60, max(5, cfg.nodes/10)))
	// The operator's memory peaks in the upgrade: its heap in the thick of
	// it (100 s in at 1000 nodes), what it allocated since the rollout's
	// end with -base heap-ready.pprof.
	heapCtx, heapTaken := context.WithCancel(ctx)
	defer heapTaken()
	go func() {
		select {
		case <-heapCtx.Done():
			progress(cfg.log, "profile heap-upgrade.pprof: not taken, the upgrade was over first")
		case <-time.After(time.Duration(cfg.nodes) * 100 * time.Millisecond):
			saveProfile(heapCtx, cfg.log, cfg.ws.listen().Pprof, cfg.ws.profiles(), "heap-upgrade.pprof", "/debug/pprof/heap")
		}
	}()
	done, err := nodes.wait(ctx, names, cfg.limit(time.Hour))
	if err != nil {
		return window{}, fmt.Errorf("upgrade: %w", err)
	}
	r.UpgradeSeconds = done.Sub(start).Seconds()
	r.UpgradingMean, r.UpgradingPeak = nodes.upgradingUntil(done)
	progress(cfg.log, "every node on %s after %.1fs, %.1f nodes upgrading at once on average, %d at most",
		upgradedVersion, r.UpgradeSeconds, r.UpgradingMean, r.UpgradingPeak)
	sleepUntil(ctx, done.Add(settle))
	return window{start, done.Add(settle)}, nil
}
