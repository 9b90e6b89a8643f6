package chaos

import (
	"fmt"
	"slices"
	"sort"
	"time"

	gpuv1 "github.com/gpu-operator/gpu-operator/api/v1"
	"github.com/gpu-operator/gpu-operator/internal/arbiter"
	"github.com/gpu-operator/gpu-operator/internal/state"
	"github.com/gpu-operator/gpu-operator/internal/test/simcluster"
)

// Invariants are the counts that must all be zero after a chaos run.
type Invariants struct {
	// PodsBeforePrerequisites: operand pods created for a node while a
	// state they wait for was not ready (or disabled) there.
	PodsBeforePrerequisites int `json:"podsBeforePrerequisites"`
	// DriverPodsDeletedOutsideUpgrade: driver pods that started going while
	// their node was neither at the upgrade's pod-restart-required step
	// nor at a repair's driver-reload step, the node still existed and a
	// ClusterPolicy was active.
	DriverPodsDeletedOutsideUpgrade int `json:"driverPodsDeletedOutsideUpgrade"`
	// WorkloadPodsDeletedNotEvicted: pods outside the operator's namespace
	// the operator deleted rather than evicted (its audit log).
	WorkloadPodsDeletedNotEvicted int `json:"workloadPodsDeletedNotEvicted"`
	// InstantsOverBudget: node versions after which an operation (a
	// driver upgrade, a repair, a MIG reconfiguration) held more nodes
	// than its budget allows. A MIG reconfiguration that restores a
	// node's devices within another operation's hold takes no place.
	InstantsOverBudget int `json:"instantsOverBudget"`
	// InstantsOverDomainCap: node versions after which more NVLink
	// domains had a node out of service than the cap allows.
	InstantsOverDomainCap int `json:"instantsOverDomainCap"`
	// InstantsActedOnByTwo: node versions in which two operations acted
	// on one node.
	InstantsActedOnByTwo int `json:"instantsActedOnByTwo"`
	// NodesLeftTainted: nodes carrying the operator's repair, MIG or switch taint
	// at the end.
	NodesLeftTainted int `json:"nodesLeftTainted"`
	// NodesNotFinal: nodes an operation had not finished on at the end.
	NodesNotFinal int `json:"nodesNotFinal"`
	// NodesLeftCordoned: nodes unschedulable at the end.
	NodesLeftCordoned int `json:"nodesLeftCordoned"`
	// PhasesNotConverged: faults after which the fleet did not converge
	// within the limit.
	PhasesNotConverged int `json:"phasesNotConverged"`
	// UserMarksLost: the run's own node labels and taints missing at the
	// end.
	UserMarksLost int `json:"userMarksLost"`
	// BothPluginsOnANode: times a node had a device plugin pod and a DRA
	// driver pod at once, each from its creation until its removal from
	// the API server (its containers stopped): the kubelet would hand the
	// same GPU out twice.
	BothPluginsOnANode int `json:"bothPluginsOnANode"`
}

// total is the number of breaches of every kind: the run fails unless
// it is 0.
func (i Invariants) total() int {
	return i.PodsBeforePrerequisites + i.DriverPodsDeletedOutsideUpgrade + i.WorkloadPodsDeletedNotEvicted +
		i.InstantsOverBudget + i.InstantsOverDomainCap + i.InstantsActedOnByTwo + i.NodesLeftCordoned + i.NodesLeftTainted +
		i.NodesNotFinal + i.PhasesNotConverged + i.UserMarksLost + i.BothPluginsOnANode
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

// limits are the run's budgets: the most nodes each operation may hold,
// and the most NVLink domains out of service (0: no cap).
type limits struct {
	ops     [arbiter.NumOperations]int
	domains int
}

// check counts the breaches the recorded history holds, with up to a few
// examples of each; peak is the most nodes in a driver upgrade at once.
func (r *recorder) check(graph *state.Graph, l limits) (inv Invariants, seen Checked, examples []string, peak int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.sortAll()
	example := func(format string, args ...any) {
		if len(examples) < 20 {
			examples = append(examples, fmt.Sprintf(format, args...))
		}
	}
	perNode := graph.PerNode()
	inv.BothPluginsOnANode = r.bothPlugins(example)
	for _, e := range r.pods {
		if e.node == "" || e.removed {
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
		if e.state == string(state.Driver) && !n.gone && r.policyAt(e.rv) && !n.replacesDriver() {
			inv.DriverPodsDeletedOutsideUpgrade++
			example("driver pod %s on %s started going at revision %d in upgrade state %q, repair state %q",
				e.name, e.node, e.rv, n.upgradeState(), n.labels[gpuv1.LabelRemediationState])
		}
	}
	peak = r.replayMaintenance(l, &inv, example)
	return inv, seen, examples, peak
}

// bothPlugins counts the times a node came to have a device plugin pod and
// a DRA driver pod at once, in revision order. A pod counts from its
// creation until its removal; a pod there before the recording started,
// whose creation was not seen, is not counted (every run starts with no
// plugin on any node).
func (r *recorder) bothPlugins(example func(string, ...any)) int {
	live := map[string]map[string]map[string]bool{} // node -> state -> uid
	breaches := 0
	for _, e := range r.pods {
		if e.node == "" || (e.state != string(state.DevicePlugin) && e.state != string(state.DRADriver)) {
			continue
		}
		byState := live[e.node]
		if byState == nil {
			byState = map[string]map[string]bool{string(state.DevicePlugin): {}, string(state.DRADriver): {}}
			live[e.node] = byState
		}
		switch {
		case e.created:
			byState[e.state][e.uid] = true
			other := string(state.DRADriver)
			if e.state == other {
				other = string(state.DevicePlugin)
			}
			if len(byState[other]) > 0 {
				breaches++
				example("pod %s (%s) created at revision %d on %s while a %s pod was there", e.name, e.state, e.rv, e.node, other)
			}
		case e.removed:
			delete(byState[e.state], e.uid)
		}
	}
	return breaches
}

// replayMaintenance walks every node version in revision order and counts
// the instants an operation held more nodes than its budget, more NVLink
// domains were out of service than the cap, or two operations acted on
// one node; it returns the most nodes in a driver upgrade at once.
func (r *recorder) replayMaintenance(l limits, inv *Invariants, example func(string, ...any)) int {
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
	current := map[string]nodeVersion{}
	peak := 0
	for _, c := range all {
		if c.v.gone {
			delete(current, c.node)
		} else {
			current[c.node] = c.v
		}
		var held [arbiter.NumOperations]int
		domains := map[string]bool{}
		acting := 0
		for name, v := range current {
			holders, act := 0, 0
			for op := range arbiter.NumOperations {
				ph := v.phase(op)
				if ph.Holds() {
					holders++
				}
				if ph == arbiter.Active {
					act++
				}
			}
			for op := range arbiter.NumOperations {
				if v.phase(op).Holds() && (op != arbiter.MIGReconfiguration || holders == 1) {
					held[op]++
				}
			}
			if holders > 0 {
				domain := v.domain
				if domain == "" {
					domain = "node/" + name
				}
				domains[domain] = true
			}
			if act > 1 && name == c.node {
				acting++
			}
		}
		peak = max(peak, held[arbiter.DriverUpgrade])
		for op := range arbiter.NumOperations {
			if l.ops[op] > 0 && held[op] > l.ops[op] {
				inv.InstantsOverBudget++
				example("%d nodes held by the %s at revision %d (budget %d)", held[op], op, c.v.rv, l.ops[op])
			}
		}
		if l.domains > 0 && len(domains) > l.domains {
			inv.InstantsOverDomainCap++
			example("%d NVLink domains out of service at revision %d (cap %d)", len(domains), c.v.rv, l.domains)
		}
		if acting > 0 {
			inv.InstantsActedOnByTwo++
			example("two operations act on %s at revision %d", c.node, c.v.rv)
		}
	}
	return peak
}

// replacesDriver reports whether an operation may delete the node's
// driver pod in this version: the upgrade at its pod restart, or a repair
// reloading the driver.
func (v nodeVersion) replacesDriver() bool {
	return v.upgradeState() == gpuv1.UpgradePodRestart ||
		v.labels[gpuv1.LabelRemediationState] == string(gpuv1.RemediationDriverReload)
}

// final reports whether every operation is where it ends in a node
// version: nothing to do, or done. A node an operation wants (required)
// is not final either.
func (v nodeVersion) final() bool {
	for op := range arbiter.NumOperations {
		if v.phase(op) != arbiter.Idle {
			return false
		}
	}
	return true
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
