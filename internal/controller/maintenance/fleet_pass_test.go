package maintenance

import (
	gpuv1 "github.com/gpu-operator/gpu-operator/api/v1"
	"github.com/gpu-operator/gpu-operator/internal/arbiter"
	"github.com/gpu-operator/gpu-operator/internal/migreconfig"
	"github.com/gpu-operator/gpu-operator/internal/remediation"
	"github.com/gpu-operator/gpu-operator/internal/upgrade"
)

// effect is one write of a node's pass (a taint, a cordon, a label and its
// annotations) or one call whose effect the node shows (an eviction, a
// pod deleted).
type effect func(*node)

// pass is one look of the maintenance controller at the fleet, as
// internal/controller/maintenance takes it: the node controller's word on
// each node, the arbiter's admission, then each node's machines in order,
// each deciding on the node as the one before left it. skip names a node
// whose writes all conflict, cut one whose look stops after its first
// write (the operator killed); -1 for none. A start that took no place
// (a free MIG reconfiguration) is marked on its node (node.freeHold).
func (w world) pass(j *judge, skip, cut int) world {
	for i := range w.size {
		w.n[i].judge(w.poolMode, w.dynamicMIG)
	}
	views := make([]arbiter.Node, w.size)
	var runs [fleetSize][arbiter.NumOperations]bool
	for i := range views {
		look := j.look(&w, i)
		views[i], runs[i] = look.view, look.runs
	}
	admission, errs := arbiter.Admit(views, j.p.budgets)
	if len(errs) > 0 {
		panic(errs)
	}
	for i := range int(w.size) {
		admitted, ok := admission.Admitted[views[i].Name]
		if !ok {
			admitted = arbiter.None
		}
		starts, _ := arbiter.Candidates(&views[i])
		free := len(starts) > 0 && starts[0].Free
		effects := w.n[i].step(&views[i], runs[i], admitted, free, w.poolMode)
		if w.n[i].byDRADriver(w.dynamicMIG) && !runs[i][arbiter.MIGReconfiguration] {
			// The look lets the node's reconfiguration go before it steps
			// the node's machines, as forgetMIG does under DynamicMIG.
			effects = append([]effect{forgetMIGToDRA}, effects...)
		}
		switch i {
		case skip:
			effects = nil
		case cut:
			effects = effects[:min(len(effects), 1)]
		}
		for _, e := range effects {
			e(&w.n[i])
			w.n[i].keepPool()
		}
	}
	return w
}

// keepPool records the pool a hold was taken under, as each operation's
// state write that holds the node writes it; nothing is kept once nothing
// holds the node (the controller ignores what is left then).
func (n *node) keepPool() {
	switch {
	case !held(*n):
		n.kept = 0
	case n.kept == 0:
		n.kept = 1 + uint8(count(n.moved))
	}
}

// step takes one step of each machine on the node, in the arbiter's
// order, and returns the effects in the order the controller makes them.
func (n node) step(view *arbiter.Node, runs [arbiter.NumOperations]bool, admitted arbiter.Operation, free bool, pool mode) []effect {
	var all []effect
	cur := n
	for op := range arbiter.NumOperations {
		if !runs[op] {
			continue // as the controller skips a machine that does not run
		}
		var effects []effect
		switch op {
		case arbiter.DriverUpgrade:
			effects = cur.stepUpgrade(view, admitted)
		case arbiter.Repair:
			effects = cur.stepRepair(view, admitted)
		case arbiter.MIGReconfiguration:
			effects = cur.stepMIG(view, admitted)
		case arbiter.ModeSwitch:
			effects = cur.stepSwitch(view, admitted, pool)
		}
		if admitted == op && len(effects) > 0 {
			// The start's place, for the budget check.
			effects = append(effects, func(n *node) { n.freeHold[op] = free })
		}
		for _, e := range effects {
			e(&cur)
		}
		all = append(all, effects...)
	}
	return all
}

// forgetMIGToDRA is the reconfiguration let go on a node the DRA
// driver's DynamicMIG manages: its marks go, mig-manager's own label
// stays, and what is applied is recorded as gone.
func forgetMIGToDRA(n *node) {
	n.mig, n.migTaint, n.migTarget, n.migAttempt, n.migBound, n.migRequeues = 0, false, noConfig, 0, false, 0
	n.expired[arbiter.MIGReconfiguration], n.freeHold[arbiter.MIGReconfiguration] = false, false
	n.appliedDynamic = n.appliedDynamic || n.applied != noConfig
}

// evict evicts the node's GPU pods: they leave unless a
// PodDisruptionBudget holds them.
func evict(n *node) {
	if !n.pdb {
		n.pods = false
	}
}

func count(b bool) int {
	if b {
		return 1
	}
	return 0
}

func (n *node) stepUpgrade(view *arbiter.Node, admitted arbiter.Operation) []effect {
	st := n.up.label()
	f := upgrade.Facts{State: st, Since: n.since(arbiter.DriverUpgrade), Now: now, Cordoned: n.upCordon,
		Outdated: (!n.driverGone && n.driverOld) || (n.driverGone && st == gpuv1.UpgradePodRestart),
		Admitted: admitted == arbiter.DriverUpgrade}
	switch st {
	case gpuv1.UpgradePodDeletion, gpuv1.UpgradeDrainRequired:
		f.GPUPods = count(n.pods)
	case gpuv1.UpgradeValidation:
		f.Validated = !n.driverGone && !n.driverOld && n.pluginReady
	}
	step := upgrade.Next(f, upgradePolicy)
	if ok, _ := arbiter.Vet(view, arbiter.DriverUpgrade, arbiter.UpgradePhase(st, true), arbiter.UpgradePhase(step.Next, true), admitted); !ok {
		step = upgrade.Step{Next: st}
	}
	var effects []effect
	cordon := n.upCordon
	switch step.Action {
	case upgrade.Cordon:
		cordon = true
	case upgrade.EvictGPUPods, upgrade.Drain:
		effects = append(effects, evict)
	case upgrade.DeleteDriverPod:
		effects = append(effects, func(n *node) { n.driverGone = true })
	case upgrade.Uncordon:
		cordon = false
	}
	if cordon != n.upCordon {
		effects = append(effects, func(n *node) { n.upCordon = cordon })
	}
	if step.Next != st {
		next := upOf(step.Next)
		effects = append(effects, func(n *node) {
			n.up, n.expired[arbiter.DriverUpgrade] = next, false
			n.release(arbiter.DriverUpgrade)
		})
	}
	return effects
}

// health is what a device plugin that runs says of the node's GPUs; old:
// the pod a repair replaces is still there.
func (n *node) health(old bool) remediation.Health {
	switch {
	case old || !n.pluginReady:
		return remediation.Unknown
	case n.unhealthy:
		return remediation.Unhealthy
	}
	return remediation.Healthy
}

func (n *node) stepRepair(view *arbiter.Node, admitted arbiter.Operation) []effect {
	st := n.rep.label()
	f := remediation.Facts{State: st, Since: n.since(arbiter.Repair), Now: now, UnhealthyGPUs: int64(count(n.unhealthySeen)),
		Admitted: admitted == arbiter.Repair, UpgradeHeld: arbiter.UpgradeHeld(n.up.label(), true, false), DriverReloadable: true,
		AfterReboot: n.repAfterReboot}
	parked := st == gpuv1.RemediationRebootRequired || st == gpuv1.RemediationFailed
	f.Rebooted = parked && n.repBootGen != n.bootGen
	switch st {
	case gpuv1.RemediationEviction:
		f.GPUPods = count(n.pods)
	case gpuv1.RemediationDevicePluginRestart:
		f.PluginToReplace, f.Plugin, f.DriverOutdated = n.repOldPlugin, n.health(n.repOldPlugin), n.driverOld
	case gpuv1.RemediationDriverReload:
		f.DriverReplaced = !n.driverGone && n.driverPodGen != n.repPodGen
		f.DriverOutdated = n.driverOld
	case gpuv1.RemediationValidation, gpuv1.RemediationRebootRequired, gpuv1.RemediationFailed:
		f.Plugin = n.health(false)
	}
	step := remediation.Next(f, repairPolicy)
	if ok, _ := arbiter.Vet(view, arbiter.Repair, arbiter.RepairPhase(st, true), arbiter.RepairPhase(step.Next, true), admitted); !ok {
		step = remediation.Step{Next: st}
	}
	var effects []effect
	switch step.Action {
	case remediation.EvictGPUPods:
		effects = append(effects, evict)
	case remediation.RestartDevicePlugin:
		effects = append(effects, func(n *node) {
			n.repOldPlugin, n.restarting = false, true
			if n.heal == healsOnPluginRestart {
				n.unhealthy = false
			}
		})
	case remediation.DeleteDriverPod:
		effects = append(effects, func(n *node) { n.driverGone = true })
	}
	// The taint goes on before the label that starts the repair, and
	// comes off before the one that ends it.
	if taint := remediation.Tainted(step.Next); taint != n.repTaint {
		effects = append(effects, func(n *node) { n.repTaint = taint })
	}
	if step.Next != st {
		next, rebooted := repOf(step.Next), f.Rebooted
		effects = append(effects, func(n *node) {
			n.rep, n.expired[arbiter.Repair] = next, false
			switch step.Next {
			case gpuv1.RemediationDevicePluginRestart:
				n.repOldPlugin = true
			case gpuv1.RemediationDriverReload:
				n.repPodGen = n.driverPodGen
			case gpuv1.RemediationRebootRequired, gpuv1.RemediationFailed:
				n.repBootGen = n.bootGen
			case gpuv1.RemediationValidation:
				n.repAfterReboot = rebooted
			}
			n.release(arbiter.Repair)
		})
	}
	return effects
}

func (n *node) stepMIG(view *arbiter.Node, admitted arbiter.Operation) []effect {
	st := n.mig.label()
	f := migreconfig.Facts{State: st, Since: n.since(arbiter.MIGReconfiguration), Now: now, Desired: n.desired.String(),
		Applied: n.applied.String(), Target: n.migTarget.String(), Lost: n.lost(), Admitted: admitted == arbiter.MIGReconfiguration,
		ClientPods: count(n.pluginReady), ManagerPods: count(n.migPod != 0), Attempt: int(n.migAttempt),
		AttemptSince: n.since(arbiter.MIGReconfiguration), Requeues: int(n.migRequeues), InPlace: migreconfig.Differs}
	bind := false
	if st == gpuv1.MIGApply {
		// As the controller reads the attempt's pod (migFacts).
		switch {
		case !n.migBound && n.migPod == 1:
			bind, f.ConfigState = true, n.migWord.label()
		case n.migBound && n.migPod == 1:
			f.ConfigState = n.migWord.label()
		case n.migBound:
			f.AttemptPodGone = true
		}
	}
	switch st {
	case gpuv1.MIGEviction:
		f.GPUPods = count(n.pods)
	case gpuv1.MIGValidation:
		if n.pluginReady && !n.lost() {
			f.Advertised = migreconfig.Matches
		}
	}
	step := migreconfig.Next(f, migPolicy)
	if ok, _ := arbiter.Vet(view, arbiter.MIGReconfiguration, arbiter.MIGPhase(st, true), arbiter.MIGPhase(step.Next, true), admitted); !ok {
		step, bind = migreconfig.Step{Next: st}, false
	}
	var effects []effect
	if step.Action == migreconfig.EvictGPUPods {
		effects = append(effects, evict)
	}
	// The taint and the pending mark go first, as patchMIG writes them.
	if taint := migreconfig.Tainted(step.Next); taint != n.migTaint || step.Action == migreconfig.StartAttempt {
		pending := step.Action == migreconfig.StartAttempt
		effects = append(effects, func(n *node) {
			n.migTaint = taint
			if pending {
				n.migWord = pendingWord
			}
		})
	}
	if step.Next == st && step.Action != migreconfig.StartAttempt && !bind {
		return effects
	}
	// The label and annotations, as writeMIG writes them.
	effects = append(effects, func(n *node) {
		next := migOf(step.Next)
		if next != n.mig {
			n.expired[arbiter.MIGReconfiguration] = false
		}
		requeues := n.migRequeues
		if step.Requeue {
			requeues++
		}
		if !(requeues > 0 && (migreconfig.InProgress(step.Next) || step.Next == gpuv1.MIGReconfigureRequired)) {
			requeues = 0
		}
		switch {
		case step.Action == migreconfig.StartAttempt:
			n.migAttempt, n.migBound = uint8(step.Attempt), false
			n.expired[arbiter.MIGReconfiguration] = false // a new attempt's clock
		case step.Retry:
			n.migAttempt, n.migBound = uint8(step.Attempt), false
		case step.Next == gpuv1.MIGApply:
			n.migBound = n.migBound || bind
		case step.Next == gpuv1.MIGClientsOff && st == gpuv1.MIGClientsOff:
			// Still waiting for the attempt's pod to go: the count stays.
		default:
			n.migAttempt, n.migBound = 0, false
		}
		if migreconfig.Tainted(step.Next) && step.Target != "" {
			n.migTarget = configOf(step.Target)
		} else if !migreconfig.Tainted(step.Next) {
			n.migTarget = noConfig
		}
		if step.Next == gpuv1.MIGValidation && st == gpuv1.MIGApply {
			n.applied, n.appliedGen, n.appliedDynamic = n.migTarget, n.gen, false
		}
		n.mig, n.migRequeues = next, requeues
		n.release(arbiter.MIGReconfiguration)
	})
	return effects
}

func configOf(name string) config {
	for c := noConfig; c <= whole; c++ {
		if c.String() == name {
			return c
		}
	}
	panic("no configuration " + name)
}

func (w word) label() string {
	return [...]string{"", gpuv1.MIGConfigPending, gpuv1.MIGConfigSuccess, gpuv1.MIGConfigFailed}[w]
}

// release forgets what an operation's hold kept once it lets the node go.
func (n *node) release(op arbiter.Operation) {
	if !n.phase(op).Holds() {
		n.freeHold[op] = false
	}
}
