package chaos

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"

	gpuv1 "github.com/gpu-operator/gpu-operator/api/v1"
	"github.com/gpu-operator/gpu-operator/internal/arbiter"
	"github.com/gpu-operator/gpu-operator/internal/render"
	"github.com/gpu-operator/gpu-operator/internal/state/registry"
)

// upgrades is a budget of n driver upgrades and no other.
func upgrades(n int) limits {
	var l limits
	l.ops[arbiter.DriverUpgrade] = n
	return l
}

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
	inv, _, examples, peak := r.check(graph, upgrades(1))
	if inv.PodsBeforePrerequisites != 1 || inv.DriverPodsDeletedOutsideUpgrade != 1 || inv.InstantsOverBudget != 2 || peak != 2 {
		t.Fatalf("got %+v, peak %d; examples:\n%v", inv, peak, examples)
	}

	// The same history within a budget of 2 and without the two breaches.
	r.pods = []podEvent{r.pods[1], r.pods[3]}
	inv, _, examples, _ = r.check(graph, upgrades(2))
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
	inv, seen, _, _ := r.check(graph, upgrades(1))
	if inv.PodsBeforePrerequisites != 0 || seen.PodsCreatedOnStaleView != 1 {
		t.Fatalf("got %+v, %+v", inv, seen)
	}
	r.pods[0].seen = t0.Add(time.Second + controllerLag)
	inv, seen, _, _ = r.check(graph, upgrades(1))
	if inv.PodsBeforePrerequisites != 1 || seen.PodsCreatedOnStaleView != 0 {
		t.Fatalf("got %+v, %+v", inv, seen)
	}
}

// The checker counts the maintenance operations' breaches: two acting on
// one node, more NVLink domains out than the cap, a MIG reconfiguration
// over its budget (but for a restore within another's hold), and a
// driver pod deleted by neither the upgrade nor a repair's reload.
func TestChaosCheckerCountsMaintenanceBreaches(t *testing.T) {
	graph, err := registry.Graph()
	if err != nil {
		t.Fatal(err)
	}
	at := func(rv uint64, domain string, kv ...string) nodeVersion {
		l := map[string]string{}
		for i := 0; i < len(kv); i += 2 {
			l[kv[i]] = kv[i+1]
		}
		return nodeVersion{rv: rv, domain: domain, labels: l}
	}
	repair, mig, upgrade := gpuv1.LabelRemediationState, gpuv1.LabelMIGReconfigureState, gpuv1.LabelUpgradeState
	all := func(n int) limits {
		return limits{ops: [arbiter.NumOperations]int{n, n, n, n}}
	}
	for _, tc := range []struct {
		name  string
		nodes map[string][]nodeVersion
		pods  []podEvent
		l     limits
		want  Invariants
	}{{
		name: "a MIG reconfiguration starts while a repair evicts",
		nodes: map[string][]nodeVersion{"a": {
			at(10, "", repair, string(gpuv1.RemediationEviction)),
			at(11, "", repair, string(gpuv1.RemediationEviction), mig, string(gpuv1.MIGApply)),
			at(12, "", repair, string(gpuv1.RemediationDone), mig, string(gpuv1.MIGReconfigureDone)),
		}},
		l:    all(5),
		want: Invariants{InstantsActedOnByTwo: 1},
	}, {
		name: "a third rack goes out under a cap of two",
		nodes: map[string][]nodeVersion{
			"a": {at(20, "r1", upgrade, string(gpuv1.UpgradeCordonRequired)), at(30, "r1", upgrade, string(gpuv1.UpgradeDone))},
			"b": {at(21, "r1", upgrade, string(gpuv1.UpgradeCordonRequired)), at(31, "r1", upgrade, string(gpuv1.UpgradeDone))},
			"c": {at(22, "r2", repair, string(gpuv1.RemediationRebootRequired)), at(32, "r2", repair, string(gpuv1.RemediationDone))},
			"d": {at(23, "r3", mig, string(gpuv1.MIGApply)), at(24, "r3", mig, string(gpuv1.MIGReconfigureDone))},
		},
		l:    limits{ops: [arbiter.NumOperations]int{10, 10, 10, 10}, domains: 2},
		want: Invariants{InstantsOverDomainCap: 1},
	}, {
		name: "a MIG restore within a validating upgrade takes no place; a second node alone does",
		nodes: map[string][]nodeVersion{
			"a": {at(30, "", upgrade, string(gpuv1.UpgradeValidation), mig, string(gpuv1.MIGApply))},
			"b": {at(31, "", mig, string(gpuv1.MIGApply)), at(33, "", mig, string(gpuv1.MIGReconfigureDone))},
			"c": {at(32, "", mig, string(gpuv1.MIGApply))},
		},
		l:    all(1),
		want: Invariants{InstantsOverBudget: 1},
	}, {
		name:  "a repair reloads the driver; nothing else deletes it",
		nodes: map[string][]nodeVersion{"a": {at(40, "", repair, string(gpuv1.RemediationDriverReload)), at(42, "", repair, string(gpuv1.RemediationValidation))}},
		pods:  []podEvent{{rv: 41, name: "driver-1", state: "driver", node: "a"}, {rv: 43, name: "driver-2", state: "driver", node: "a"}},
		l:     all(1),
		want:  Invariants{DriverPodsDeletedOutsideUpgrade: 1},
	}, {
		name: "the DRA driver created before the device plugin's pod was removed, then after",
		pods: []podEvent{
			{rv: 50, uid: "dp-1", name: "dp-1", state: "device-plugin", node: "a", created: true},
			{rv: 51, uid: "dp-1", name: "dp-1", state: "device-plugin", node: "a"}, // going, still running
			{rv: 52, uid: "dra-1", name: "dra-1", state: "dra-driver", node: "a", created: true},
			{rv: 53, uid: "dp-1", name: "dp-1", state: "device-plugin", node: "a", removed: true},
			{rv: 54, uid: "dra-1", name: "dra-1", state: "dra-driver", node: "a", removed: true},
			{rv: 55, uid: "dra-2", name: "dra-2", state: "dra-driver", node: "b", created: true},
			{rv: 56, uid: "dp-2", name: "dp-2", state: "device-plugin", node: "a", created: true},
			{rv: 57, uid: "dp-0", name: "dp-0", state: "device-plugin", node: "b", removed: true}, // listed before the recording
		},
		l:    all(1),
		want: Invariants{BothPluginsOnANode: 1},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			r := newRecorder()
			r.nodes = tc.nodes
			r.pods = tc.pods
			r.policies = []policyVersion{{rv: 1, present: true}}
			inv, _, examples, _ := r.check(graph, tc.l)
			if inv != tc.want {
				t.Fatalf("got %+v, want %+v; examples:\n%v", inv, tc.want, examples)
			}
		})
	}
}

// A node is final once every operation is done or has nothing to do.
func TestChaosFinalNodes(t *testing.T) {
	for _, tc := range []struct {
		labels map[string]string
		final  bool
	}{
		{map[string]string{}, true},
		{map[string]string{gpuv1.LabelUpgradeState: string(gpuv1.UpgradeDone), gpuv1.LabelRemediationState: string(gpuv1.RemediationDone)}, true},
		{map[string]string{gpuv1.LabelUpgradeState: string(gpuv1.UpgradeRequired)}, false},
		{map[string]string{gpuv1.LabelRemediationState: string(gpuv1.RemediationRebootRequired)}, false},
		{map[string]string{gpuv1.LabelMIGReconfigureState: string(gpuv1.MIGReconfigureFailed)}, false},
	} {
		if got := (nodeVersion{labels: tc.labels}).final(); got != tc.final {
			t.Errorf("%v: final %t, want %t", tc.labels, got, tc.final)
		}
	}
}

// A plugin pod removed while no watch ran (an API server restart) is found
// gone by the list after the gap: the DRA driver started there later is no
// breach. Without the list it would be one, which the second half checks.
func TestChaosRelistEndsPodsRemovedUnseen(t *testing.T) {
	pod := func(uid, state, rv string) *corev1.Pod {
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{UID: types.UID(uid), Name: uid, ResourceVersion: rv,
			Labels: map[string]string{render.LabelState: state}}, Spec: corev1.PodSpec{NodeName: "a"}}
	}
	for _, relist := range []bool{true, false} {
		r := newRecorder()
		r.observe(watch.Added, pod("dp-1", "device-plugin", "10"))
		if relist {
			r.relisted(&corev1.PodList{}, 20)
		}
		r.observe(watch.Added, pod("dra-1", "dra-driver", "30"))
		r.sortAll()
		want := 0
		if !relist {
			want = 1
		}
		if got := r.bothPlugins(func(string, ...any) {}); got != want {
			t.Errorf("relisted %t: %d times both plugins, want %d", relist, got, want)
		}
	}
}
