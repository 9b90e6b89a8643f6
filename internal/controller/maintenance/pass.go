package maintenance

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	gpuv1 "github.com/gpu-operator/gpu-operator/api/v1"
	"github.com/gpu-operator/gpu-operator/internal/arbiter"
	"github.com/gpu-operator/gpu-operator/internal/driverpool"
)

// machine is one operation's side of a look at the fleet.
type machine interface {
	operation() arbiter.Operation
	// runs reports whether the operation runs on the node under the
	// pass's policy.
	runs(p *pass, n *corev1.Node) bool
	// position reads where the operation stands on the node, from what
	// the pass has cached; only a MIG reconfiguration that would cost no
	// place lists the node's pods (arbiter.Node.MIGFree).
	position(ctx context.Context, p *pass, n *corev1.Node, view *arbiter.Node)
	// step gathers the facts the operation's table reads, takes its next
	// step if the turn's vet lets it, and writes the node's next state.
	step(ctx context.Context, p *pass, n *corev1.Node, t turn) (stepped, error)
	// forget removes the operation's marks from a node it does not run
	// on; nothing when it has none.
	forget(ctx context.Context, p *pass, n *corev1.Node) error
	// quiet reports whether the node's state is one whose step, having
	// written nothing, decides the same again on the same inputs,
	// whatever the clock (lookCache).
	quiet(p *pass, n *corev1.Node) bool
}

// turn is what one machine's step on a node gets from the look: whether
// Admit let its operation start there, and the arbiter's view of the
// node, as the operations stood before the look.
type turn struct {
	op arbiter.Operation
	// started is the operation Admit let start on the node this look,
	// arbiter.None if none.
	started arbiter.Operation
	view    *arbiter.Node
}

// admitted reports whether Admit let the operation start on the node.
func (t turn) admitted() bool { return t.started == t.op }

// vet asks the arbiter whether the operation may go from one phase to
// another on the node: it says why not when it may not.
func (t turn) vet(from, to arbiter.Phase) (bool, string) {
	return arbiter.Vet(t.view, t.op, from, to, t.started)
}

// keepForward writes a paused validation's time forward: where the step
// stays in its state and half of the validation's timeout has gone since
// *since, it sets *since to now and says so, for the step to write its
// state again with it (at most one write per half timeout of pause). The
// pause is read from the other operations' states: one let go halfway
// (mig-manager turned off, DynamicMIG turned on) leaves no trace, and the
// validation then has at least half its time left rather than none.
func (t turn) keepForward(since *time.Time, now time.Time, timeout time.Duration, stays bool) bool {
	if _, paused := t.view.Clock(t.op); !stays || !paused || timeout <= 0 || now.Sub(*since) < timeout/2 {
		return false
	}
	*since = now
	return true
}

// clock is the time the operation's timeouts count from in its state,
// entered at since: later where another operation acted within its
// validation, and now (no time passed) while one acts (arbiter.Node.Clock).
func (t turn) clock(since, now time.Time) time.Time {
	from, paused := t.view.Clock(t.op)
	switch {
	case paused:
		return now
	case from.After(since):
		return from
	}
	return since
}

// stepped is what a machine's step did to a node.
type stepped struct {
	// node is the node as the step's writes left it: the next machine's
	// write is conditional on it. The same node when nothing was written.
	node *corev1.Node
	// busy is true while the node is on its way: its step polls, for its
	// timeouts and the pods it lists live.
	busy bool
}

// pass is what one look at the fleet reads once, for every node.
type pass struct {
	r   *Reconciler
	cp  *gpuv1.ClusterPolicy
	obs *observed
	now time.Time
	// sel are the upgrade policy's pod selectors, which every operation
	// evicts by; nil without a policy. poolSel are those of the driver
	// pools with upgrade settings of their own (NVIDIADrivers), which
	// their nodes' upgrades evict by.
	sel     *podSelectors
	poolSel map[string]*podSelectors
	// byHand is, per driver pool, how the GPU pods leave a node whose
	// driver pod a person replaced, from driver.manager's env; a pool
	// whose env does not parse has none, and its upgrade policy applies.
	byHand map[string]*byHandEviction
	// configs is the file of MIG configurations.
	configs migConfigs
	// dynamicMIG is true where the DRA driver in force makes MIG devices
	// itself: mig-manager does not run on nodes in allocation mode dra.
	dynamicMIG bool
	budgets    arbiter.Budgets
	machines   []machine
	tally      *tally
}

func (r *Reconciler) newPass(ctx context.Context, cp *gpuv1.ClusterPolicy, obs *observed) (*pass, error) {
	p := &pass{r: r, cp: cp, obs: obs, now: r.now(), tally: &tally{}}
	p.machines = []machine{&upgrades{}, &repairs{}, &reconfigurations{}, &switches{}}
	if cp == nil {
		return p, nil
	}
	var err error
	if obs.pools, err = driverpool.Load(ctx, r.Client, cp, r.Pods); err != nil {
		return nil, err
	}
	// An invalid selector stored before the API server refused it:
	// nothing is evicted by a selector that matches nothing, or
	// everything, in its place.
	if p.sel, err = parseSelectors(&cp.Spec.Driver.UpgradePolicy); err != nil {
		return nil, err
	}
	p.poolSel = map[string]*podSelectors{}
	for i := range obs.pools.Pools {
		pool := &obs.pools.Pools[i]
		if p.poolSel[pool.Name], err = parseSelectors(&pool.Driver.UpgradePolicy); err != nil {
			return nil, fmt.Errorf("driver pool %s: %w", pool.Name, err)
		}
	}
	p.byHand = byHandEvictions(obs.pools)
	if cp.Spec.MIGManager.Manages() {
		if p.configs, err = r.readMIGConfigs(ctx, &cp.Spec.MIGManager); err != nil {
			return nil, err
		}

	}
	p.dynamicMIG = obs.pools.DRADriverFor(cp).DynamicMIG()
	p.budgets = budgetsOf(cp, obs.pools)
	return p, nil
}

// view is what the arbiter knows of a node: where each operation stands.
func (p *pass) view(ctx context.Context, n *corev1.Node) arbiter.Node {
	return p.viewOf(ctx, n, p.runsOn(n))
}

// runsOn are the machines that run on the node, a bit each by their place
// in p.machines.
func (p *pass) runsOn(n *corev1.Node) uint8 {
	var runs uint8
	for i, m := range p.machines {
		if m.runs(p, n) {
			runs |= 1 << i
		}
	}
	return runs
}

// viewOf is the node's view where the machines runs run.
func (p *pass) viewOf(ctx context.Context, n *corev1.Node, runs uint8) arbiter.Node {
	v := arbiter.Node{Name: n.Name, Pool: p.poolOf(n), Domain: domainOf(n),
		Unavailable: n.Spec.Unschedulable || !nodeReady(n)}
	for i, m := range p.machines {
		if runs&(1<<i) != 0 {
			m.position(ctx, p, n, &v)
		}
	}
	// A node that still carries this operator's marks of an operation
	// that no longer runs there (DynamicMIG took its MIG devices over, the
	// operation was turned off) is out of service until the look's forget
	// has removed them, a write that may conflict: the availability
	// budgets count it, though no operation holds it in the view.
	if !v.Held() && heldByOwnMarks(n) {
		v.Unavailable = true
	}
	return v
}

// upgradeBudgets are an upgrade policy's budgets, per driver pool: those
// of one pool, or of every pool without its own. They bound the pool's
// driver upgrades, and, each its own count, its allocation mode switches
// (op).
func upgradeBudgets(up *gpuv1.DriverUpgradePolicySpec, field, pool string, op arbiter.Operation) []arbiter.Budget {
	parallel := int32(1)
	if up.MaxParallelUpgrades != nil {
		parallel = *up.MaxParallelUpgrades
	}
	unavailable := intstr.FromString("25%")
	if up.MaxUnavailable != nil {
		unavailable = *up.MaxUnavailable
	}
	return []arbiter.Budget{
		{Field: field + ".maxParallelUpgrades", Op: op, Limit: intstr.FromInt32(parallel),
			Unlimited: parallel == 0, PerPool: true, Pool: pool, Others: pool == ""},
		{Field: field + ".maxUnavailable", Op: op, Limit: unavailable, PerPool: true, Unavailable: true,
			Pool: pool, Others: pool == ""},
	}
}

// selectors are the pod selectors the node's upgrade evicts by: its
// driver pool's.
func (p *pass) selectors(n *corev1.Node) *podSelectors {
	if sel := p.poolSel[p.poolOf(n)]; sel != nil {
		return sel
	}
	return p.sel
}

// budgetsOf are the budgets each operation's starts must fit, from the
// policy: the upgrade's per driver pool, which bound the allocation mode
// switches too, the repair's and the MIG reconfiguration's over the
// fleet, and the NVLink domain cap over the fleet for all of them.
func budgetsOf(cp *gpuv1.ClusterPolicy, pools *driverpool.Set) arbiter.Budgets {
	var b arbiter.Budgets
	for _, op := range []arbiter.Operation{arbiter.DriverUpgrade, arbiter.ModeSwitch} {
		b[op] = upgradeBudgets(&cp.Spec.Driver.UpgradePolicy, "driver.upgradePolicy", "", op)
		for i := range pools.Pools {
			pool := &pools.Pools[i]
			if pool.OwnUpgradePolicy {
				b[op] = append(b[op], upgradeBudgets(&pool.Driver.UpgradePolicy, "NVIDIADriver "+pool.Name+" spec.upgradePolicy", pool.Name, op)...)
			}
		}
	}
	b[arbiter.Repair] = []arbiter.Budget{{Field: "operator.remediation.maxParallel", Op: arbiter.Repair,
		Limit: cp.Spec.Operator.Remediation.MaxParallelOrDefault()}}
	b[arbiter.MIGReconfiguration] = []arbiter.Budget{{Field: "migManager.maxParallel", Op: arbiter.MIGReconfiguration,
		Limit: cp.Spec.MIGManager.MaxParallelOrDefault()}}
	if domains := cp.Spec.Operator.Maintenance.MaxUnavailableNVLinkDomains; domains != nil {
		// Over the fleet, not per pool: a rack whose trays sit in two
		// pools is one rack (issue 52, finding 6). Cordoned and NotReady
		// nodes count their domain out of service too, whoever cordoned
		// them.
		cap := arbiter.Budget{Field: "operator.maintenance.maxUnavailableNVLinkDomains", Op: arbiter.None, Limit: *domains,
			Domains: true, Unavailable: true}
		for op := range arbiter.NumOperations {
			b[op] = append(b[op], cap)
		}
	}
	return b
}
