package maintenance

import (
	"reflect"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	gpuv1 "github.com/gpu-operator/gpu-operator/api/v1"
	"github.com/gpu-operator/gpu-operator/internal/arbiter"
	"github.com/gpu-operator/gpu-operator/internal/driverpool"
	"github.com/gpu-operator/gpu-operator/internal/gating"
	"github.com/gpu-operator/gpu-operator/internal/operandpods"
)

// lookCache keeps, between looks, what a look judged of each quiet node:
// one whose every operation is idle or waits for a start, whose steps
// wrote nothing, and would decide the same again on the same node, the
// same operand pods and the same policy, whatever the clock says (quiet).
// A look takes such a node's view, its machines and its step's outcome
// from here while none of those inputs changed, and judges only the
// others: late in a rollout of thousands of nodes, most of them wait in
// upgrade-required or are done, and every look judged each of them again
// (issue 54: 36% of the operator's CPU at 5000 nodes).
//
// Admission still runs over the whole fleet's views at every look, and
// each node's waiting reason is compared at every look: what a node waits
// for depends on the others. A look that finds the pass's inputs changed,
// and the first look after Timers.FullLook, judges every node again.
//
// Only Reconcile uses it, one look at a time (the controller has one key).
type lookCache struct {
	// inputs are what the pass of the entries read beside the nodes and
	// their pods; full is when every node was last judged.
	inputs passInputs
	full   time.Time
	nodes  map[string]*kept
	// reused counts the steps taken from here, for the tests that prove
	// the cache is used.
	reused int
}

// kept is one quiet node's last judgement and the inputs it was made on.
type kept struct {
	uid     types.UID
	version string
	pods    podKey
	// runs are the machines that run on the node, by their place in
	// pass.machines.
	runs uint8
	view arbiter.Node
	busy bool
	// upgrade is the state the upgrade's step counted in the tally, if
	// it runs there (counted).
	upgrade gpuv1.UpgradeState
	counted bool
}

// podKey is what a node's steps read of its operand pods (observed): the
// index's summaries, replaced, never changed, when their pod changes, and
// the counts.
type podKey struct {
	driver, plugin, draPlugin, migManager           *operandpods.Pod
	downstream, plugins, migClients, migManagerPods int
}

func (o *observed) podKeyOf(node string) podKey {
	return podKey{driver: o.driverPods[node], plugin: o.pluginPods[node], draPlugin: o.draPluginPods[node],
		migManager: o.migManagers[node], downstream: o.downstream[node], plugins: o.plugins[node],
		migClients: o.migClients[node], migManagerPods: o.migManagerPods[node]}
}

// passInputs are what a pass's steps read beside the node and its pods:
// the policy's spec, the driver pools (NVIDIADrivers, GPUCluster, image
// verdicts), the driver DaemonSets' templates, the MIG configurations and
// whether the DRA driver makes MIG devices. Everything else a pass holds
// (budgets, selectors, by-hand evictions) is derived from them.
type passInputs struct {
	policy     types.UID
	spec       *gpuv1.ClusterPolicySpec
	pools      *driverpool.Set
	hashes     map[string]string
	deleting   map[string]bool
	configs    migConfigs
	dynamicMIG bool
}

func (p *pass) inputs() passInputs {
	in := passInputs{hashes: p.obs.hashes, deleting: p.obs.deleting, pools: p.obs.pools, configs: p.configs, dynamicMIG: p.dynamicMIG}
	if p.cp != nil {
		in.policy, in.spec = p.cp.UID, &p.cp.Spec
	}
	return in
}

// same reports whether two passes' steps read the same inputs.
func (in passInputs) same(other passInputs) bool {
	return in.policy == other.policy && in.dynamicMIG == other.dynamicMIG &&
		reflect.DeepEqual(in.spec, other.spec) && in.pools.Equal(other.pools) &&
		reflect.DeepEqual(in.hashes, other.hashes) && reflect.DeepEqual(in.deleting, other.deleting) &&
		reflect.DeepEqual(in.configs, other.configs)
}

// begin starts a look with pass p: it forgets every judgement when the
// pass's inputs changed, or every is nonzero and a full look is due. It
// reports whether this look is a full one.
func (c *lookCache) begin(p *pass, every time.Duration) bool {
	in := p.inputs()
	if c.nodes != nil && in.same(c.inputs) && (every <= 0 || p.now.Sub(c.full) < every) && !p.now.Before(c.full) {
		return false
	}
	// The spec and pools of the cache's objects are kept as they are now:
	// the cache replaces objects, it does not change them, but a pass
	// read from a live client owns them.
	if in.spec != nil {
		in.spec = in.spec.DeepCopy()
	}
	c.inputs, c.full, c.nodes = in, p.now, map[string]*kept{}
	return true
}

// lookup returns the node's last judgement, if the node and its pods are
// those it was made on. A node with no resourceVersion (one not read from
// an API server) has no version to compare, and none.
func (c *lookCache) lookup(n *corev1.Node, pods podKey) *kept {
	j := c.nodes[n.Name]
	if j == nil || n.ResourceVersion == "" || j.uid != n.UID || j.version != n.ResourceVersion || j.pods != pods {
		return nil
	}
	return j
}

// keep records a quiet node's judgement; forget drops a node's.
func (c *lookCache) keep(n *corev1.Node, j *kept) {
	j.uid, j.version = n.UID, n.ResourceVersion
	c.nodes[n.Name] = j
}

func (c *lookCache) forget(name string) { delete(c.nodes, name) }

// prune drops the judgements of nodes the look did not list.
func (c *lookCache) prune(listed map[string]bool) {
	for name := range c.nodes {
		if !listed[name] {
			delete(c.nodes, name)
		}
	}
}

// quiet reports whether a node's steps, which wrote nothing and were let
// start nothing, decide the same at any later look on the same node, pods
// and pass: every operation that runs there is idle, done, failed waiting
// for a person, or queued for a start, states whose tables read no clock
// and whose facts list no pods live. (The repair reads the kubelet's
// grace after a MIG change only for a node it would move out of these
// states, a write.) Not quiet: a node in allocation mode dra, whose GPUs
// are read from ResourceSlices, no part of the key.
func quiet(p *pass, n *corev1.Node, runs uint8) bool {
	if runs == 0 {
		return true
	}
	if gating.AllocationModeOf(n) == gpuv1.AllocationDRA {
		return false
	}
	for i, m := range p.machines {
		if runs&(1<<i) == 0 {
			continue
		}
		if !m.quiet(p, n) {
			return false
		}
	}
	return true
}

// The states each machine's step is quiet in (see quiet); a queued one
// only while Admit lets it start nothing. TestQuietStatesReadNoClock runs
// each table in them at different times.

func (upgrades) quiet(_ *pass, n *corev1.Node) bool { return quietUpgrade(stateOf(n)) }

func quietUpgrade(st gpuv1.UpgradeState) bool {
	switch st {
	case "", gpuv1.UpgradeDone, gpuv1.UpgradeRequired, gpuv1.UpgradeFailed:
		return true
	}
	return false
}

func (repairs) quiet(_ *pass, n *corev1.Node) bool { return quietRepair(remediationStateOf(n)) }

func quietRepair(st gpuv1.RemediationState) bool {
	return st == "" || st == gpuv1.RemediationDone
}

func (reconfigurations) quiet(_ *pass, n *corev1.Node) bool { return quietMIG(migStateOf(n)) }

func quietMIG(st gpuv1.MIGReconfigureState) bool {
	return st == "" || st == gpuv1.MIGReconfigureDone
}

func (switches) quiet(_ *pass, n *corev1.Node) bool { return quietSwitch(switchStateOf(n)) }

func quietSwitch(st gpuv1.ModeSwitchState) bool {
	return st == "" || st == gpuv1.ModeSwitchDone
}

// runs reports whether op's machine is among runs.
func (p *pass) runs(op arbiter.Operation, runs uint8) bool {
	for i, m := range p.machines {
		if m.operation() == op {
			return runs&(1<<i) != 0
		}
	}
	return false
}
