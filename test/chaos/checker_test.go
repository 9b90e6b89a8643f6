package chaos

import (
	"testing"
	"time"

	gpuv1 "github.com/gpu-operator/gpu-operator/api/v1"
	"github.com/gpu-operator/gpu-operator/internal/state/registry"
)

// The checker finds each kind of breach in a recorded history, and none in
// a history where everything happened in order: it can fail.
func TestChaosCheckerCountsBreaches(t *testing.T) {
	graph, err := registry.Graph()
	if err != nil {
		t.Fatal(err)
	}
	labels := func(driver, toolkit string, upgrade gpuv1.UpgradeState) map[string]string {
		l := map[string]string{gpuv1.StateLabel("driver"): driver, gpuv1.StateLabel("container-toolkit"): toolkit}
		if upgrade != "" {
			l[gpuv1.LabelUpgradeState] = string(upgrade)
		}
		return l
	}
	r := newRecorder()
	r.nodes["a"] = []nodeVersion{
		{rv: 10, labels: labels("pending", "pending", "")},
		{rv: 20, labels: labels("ready", "ready", "")},
		{rv: 40, labels: labels("ready", "ready", gpuv1.UpgradeCordonRequired)},
		{rv: 50, labels: labels("upgrading", "ready", gpuv1.UpgradePodRestart)},
		{rv: 70, labels: labels("ready", "ready", gpuv1.UpgradeDone)},
	}
	r.nodes["b"] = []nodeVersion{
		{rv: 11, labels: labels("ready", "ready", "")},
		{rv: 45, labels: labels("ready", "ready", gpuv1.UpgradeCordonRequired)},
		{rv: 80, labels: labels("ready", "ready", gpuv1.UpgradeDone)},
	}
	r.policies = []policyVersion{{rv: 1, present: true}}
	r.pods = []podEvent{
		{rv: 15, name: "early-plugin", state: "device-plugin", node: "a", created: true}, // breach: driver pending
		{rv: 25, name: "plugin", state: "device-plugin", node: "a", created: true},
		{rv: 42, name: "driver-a", state: "driver", node: "a"}, // breach: not at pod-restart
		{rv: 55, name: "driver-a2", state: "driver", node: "a"},
	}
	inv, _, examples, peak := r.check(graph, 1)
	if inv.PodsBeforePrerequisites != 1 || inv.DriverPodsDeletedOutsideUpgrade != 1 || inv.InstantsOverBudget != 2 || peak != 2 {
		t.Fatalf("got %+v, peak %d; examples:\n%v", inv, peak, examples)
	}

	// The same history within a budget of 2 and without the two breaches.
	r.pods = []podEvent{r.pods[1], r.pods[3]}
	inv, _, examples, _ = r.check(graph, 2)
	if inv.total() != 0 {
		t.Fatalf("breaches in a clean history: %+v\n%v", inv, examples)
	}
}

// A pod created just after a prerequisite left ready is a DaemonSet
// controller acting on its cache's older view: counted apart. Long after,
// it is a breach.
func TestChaosCheckerSeparatesAStaleControllerView(t *testing.T) {
	graph, err := registry.Graph()
	if err != nil {
		t.Fatal(err)
	}
	t0 := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	ready := map[string]string{gpuv1.StateLabel("driver"): "ready", gpuv1.StateLabel("container-toolkit"): "ready"}
	upgrading := map[string]string{gpuv1.StateLabel("driver"): "upgrading", gpuv1.StateLabel("container-toolkit"): "ready"}
	r := newRecorder()
	r.nodes["a"] = []nodeVersion{{rv: 10, seen: t0, labels: ready}, {rv: 20, seen: t0.Add(time.Second), labels: upgrading}}
	r.policies = []policyVersion{{rv: 1, present: true}}
	r.pods = []podEvent{{rv: 25, seen: t0.Add(1500 * time.Millisecond), name: "racing", state: "device-plugin", node: "a", created: true}}
	inv, seen, _, _ := r.check(graph, 1)
	if inv.PodsBeforePrerequisites != 0 || seen.PodsCreatedOnStaleView != 1 {
		t.Fatalf("got %+v, %+v", inv, seen)
	}
	r.pods[0].seen = t0.Add(time.Second + controllerLag)
	inv, seen, _, _ = r.check(graph, 1)
	if inv.PodsBeforePrerequisites != 1 || seen.PodsCreatedOnStaleView != 0 {
		t.Fatalf("got %+v, %+v", inv, seen)
	}
}
