package chaos

import (
	"fmt"
	"slices"
	"sort"
	"time"

	gpuv1 "github.com/gpu-operator/gpu-operator/api/v1"
	"github.com/gpu-operator/gpu-operator/internal/state"
	"github.com/gpu-operator/gpu-operator/internal/test/simcluster"
	"github.com/gpu-operator/gpu-operator/internal/upgrade"
)

// Invariants are the counts that must all be zero after a chaos run.
type Invariants struct {
	// PodsBeforePrerequisites: operand pods created for a node while a
	// state they wait for was not ready (or disabled) there.
	PodsBeforePrerequisites int `json:"podsBeforePrerequisites"`
	// DriverPodsDeletedOutsideUpgrade: driver pods that started going while
	// their node was not at the upgrade's pod-restart-required step, the
	// node still existed and a ClusterPolicy was active.
	DriverPodsDeletedOutsideUpgrade int `json:"driverPodsDeletedOutsideUpgrade"`
	// WorkloadPodsDeletedNotEvicted: pods outside the operator's namespace
	// the operator deleted rather than evicted (its audit log).
	WorkloadPodsDeletedNotEvicted int `json:"workloadPodsDeletedNotEvicted"`
	// InstantsOverBudget: node versions after which more nodes were in an
	// upgrade than maxParallelUpgrades allows.
	InstantsOverBudget int `json:"instantsOverBudget"`
	// NodesLeftCordoned: nodes unschedulable at the end.
	NodesLeftCordoned int `json:"nodesLeftCordoned"`
	// PhasesNotConverged: faults after which the fleet did not converge
	// within the limit.
	PhasesNotConverged int `json:"phasesNotConverged"`
	// UserMarksLost: the run's own node labels and taints missing at the
	// end.
	UserMarksLost int `json:"userMarksLost"`
}

// total is the number of breaches of every kind: the run fails unless
// it is 0.
func (i Invariants) total() int {
	return i.PodsBeforePrerequisites + i.DriverPodsDeletedOutsideUpgrade + i.WorkloadPodsDeletedNotEvicted +
		i.InstantsOverBudget + i.NodesLeftCordoned + i.PhasesNotConverged + i.UserMarksLost
}

// controllerLag is how long after a prerequisite left ready a DaemonSet
// controller may still create a pod from its cache's older view of the
// node. The gate cannot stop that; the controller deletes the pod when its
// cache catches up. Such pods are counted apart, not as breaches: the
// prerequisite was ready, and its leaving was not yet seen.
const controllerLag = 3 * time.Second

// Checked is what the checks saw besides the breaches.
type Checked struct {
	PodsCreated       int `json:"podsCreated"`
	DriverPodsDeleted int `json:"driverPodsDeleted"`
	// PodsCreatedOnStaleView are pods created within controllerLag after a
	// prerequisite left ready on their node.
	PodsCreatedOnStaleView int `json:"podsCreatedOnStaleView"`
}

// check counts the breaches the recorded history holds, with up to a few
// examples of each.
func (r *recorder) check(graph *state.Graph, maxParallel int) (Invariants, Checked, []string, int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.sortAll()
	var inv Invariants
	var seen Checked
	var examples []string
	example := func(format string, args ...any) {
		if len(examples) < 20 {
			examples = append(examples, fmt.Sprintf(format, args...))
		}
	}
	perNode := graph.PerNode()
	for _, e := range r.pods {
		if e.node == "" {
			continue
		}
		n, ok := r.nodeAt(e.node, e.rv)
		if !ok {
			continue
		}
		if e.created {
			seen.PodsCreated++
			for _, p := range graph.Prerequisites(state.Name(e.state)) {
				if !slices.Contains(perNode, p) {
					continue
				}
				label := gpuv1.StateLabel(string(p))
				v := graph.ValueOf(p, n.labels)
				if v == gpuv1.StateReady || v == gpuv1.StateDisabled {
					continue
				}
				if left, ok := r.leftReadyAt(e.node, label, e.rv); ok && e.seen.Sub(left) < controllerLag {
					seen.PodsCreatedOnStaleView++
					example("(not a breach) pod %s created at revision %d on %s %s after %s left ready",
						e.name, e.rv, e.node, e.seen.Sub(left).Round(time.Millisecond), p)
					break
				}
				inv.PodsBeforePrerequisites++
				example("pod %s created at revision %d on %s while %s was %q", e.name, e.rv, e.node, p, v)
				break
			}
			continue
		}
		if e.state == string(state.Driver) {
			seen.DriverPodsDeleted++
		}
		if e.state == string(state.Driver) && !n.gone && r.policyAt(e.rv) && n.upgradeState() != gpuv1.UpgradePodRestart {
			inv.DriverPodsDeletedOutsideUpgrade++
			example("driver pod %s on %s started going at revision %d in upgrade state %q", e.name, e.node, e.rv, n.upgradeState())
		}
	}
	peak := r.replayBudget(maxParallel, &inv, example)
	return inv, seen, examples, peak
}

// replayBudget walks every node version in revision order and counts the
// instants more nodes were in an upgrade than the budget allows; it
// returns the peak.
func (r *recorder) replayBudget(maxParallel int, inv *Invariants, example func(string, ...any)) int {
	type change struct {
		node string
		v    nodeVersion
	}
	var all []change
	for name, versions := range r.nodes {
		for _, v := range versions {
			all = append(all, change{name, v})
		}
	}
	sort.SliceStable(all, func(i, j int) bool { return all[i].v.rv < all[j].v.rv })
	current := map[string]bool{}
	peak := 0
	for _, c := range all {
		busy := !c.v.gone && upgrade.InProgress(c.v.upgradeState())
		if busy {
			current[c.node] = true
		} else {
			delete(current, c.node)
		}
		peak = max(peak, len(current))
		if len(current) > maxParallel {
			inv.InstantsOverBudget++
			example("%d nodes in an upgrade at revision %d (budget %d)", len(current), c.v.rv, maxParallel)
		}
	}
	return peak
}

// workloadDeletes counts the operator's deletes of pods outside its
// namespace, from the audit log: GPU workloads leave only by eviction.
func workloadDeletes(path string) (int, error) {
	reqs, err := simcluster.ReadAudit(path)
	if err != nil {
		return 0, err
	}
	n := 0
	for _, r := range reqs {
		if r.Verb == "delete" && r.Resource == "pods" && r.Namespace != namespace {
			n++
		}
	}
	return n, nil
}
