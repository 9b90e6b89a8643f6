package main

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	gpuv1 "github.com/gpu-operator/gpu-operator/api/v1"
)

// The upgrade's figures: two nodes upgrading for ten seconds each, one of
// them overlapping the other by five, over a twenty-second phase.
func TestInFlightCountsTheNodesInAnUpgrade(t *testing.T) {
	node := func(state gpuv1.UpgradeState) *corev1.Node {
		return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{gpuv1.LabelUpgradeState: string(state)}}}
	}
	t0 := time.Unix(0, 0)
	at := func(s int) time.Time { return t0.Add(time.Duration(s) * time.Second) }
	var f inFlight
	f.restart(t0)
	f.see(nil, node(gpuv1.UpgradeRequired), at(0))
	f.see(node(gpuv1.UpgradeRequired), node(gpuv1.UpgradeCordonRequired), at(0))
	f.see(node(gpuv1.UpgradeCordonRequired), node(gpuv1.UpgradePodRestart), at(3))
	f.see(node(gpuv1.UpgradeRequired), node(gpuv1.UpgradeCordonRequired), at(5))
	f.see(node(gpuv1.UpgradeUncordon), node(gpuv1.UpgradeDone), at(10))
	f.see(node(gpuv1.UpgradeUncordon), node(gpuv1.UpgradeDone), at(15))
	mean, peak := f.figures(at(20))
	if mean != 1 || peak != 2 {
		t.Errorf("mean %.2f, peak %d; want 1 (20 node-seconds over 20 s) and 2", mean, peak)
	}
}
