package maintenance

import (
	"fmt"
	"strings"

	gpuv1 "github.com/gpu-operator/gpu-operator/api/v1"
	"github.com/gpu-operator/gpu-operator/internal/arbiter"
	"github.com/gpu-operator/gpu-operator/internal/migreconfig"
	"github.com/gpu-operator/gpu-operator/internal/modeswitch"
	"github.com/gpu-operator/gpu-operator/internal/remediation"
	"github.com/gpu-operator/gpu-operator/internal/upgrade"
)

// violations are what a state breaks, in a person's words.
func violations(j *judge, w world) []string {
	sh := j.shape
	var out []string
	if why := j.dropped(&w); why != "" {
		out = append(out, why)
	}
	// Every share is 1 but the pair's upgrades and switches (none): no
	// operation holds more than one node of its scope but where it started
	// free (a MIG reconfiguration of a node serving nothing).
	// maxUnavailable and the NVLink domain cap count the others' holds too
	// (startViolations).
	for op := range arbiter.NumOperations {
		held := map[string]int{}
		for i := range int(w.size) {
			if n := &w.n[i]; n.phase(op).Holds() && !n.freeHold[op] && sh.share(op, n, i) > 0 {
				held[sh.scope(op, n, i)]++
			}
		}
		for scope, nodes := range held {
			if nodes > 1 {
				out = append(out, fmt.Sprintf("the %s holds %d nodes of %q, its share 1", op, nodes, scope))
			}
		}
	}
	for i := range w.size {
		n := &w.n[i]
		acting := 0
		for op := range arbiter.NumOperations {
			if n.phase(op) == arbiter.Active {
				acting++
			}
		}
		if acting > 1 {
			out = append(out, fmt.Sprintf("node %c: %d operations act on it", 'a'+i, acting))
		}
		for op := range arbiter.NumOperations {
			if timed(n, op) && !timesOut(*n, op) {
				out = append(out, fmt.Sprintf("node %c: the %s's step %s has no timeout", 'a'+i, op, n.label(op)))
			}
		}
	}
	return out
}

// startViolations are what a move from before to after breaks in its
// starts. Every budget is 1. An operation's own share counts the nodes it
// holds: a repair or a MIG reconfiguration (other than free) starts only
// where no other node holds one of its kind, whatever else holds nodes
// (issue 52, finding 2: repairs and MIG changes go on during a rollout).
// maxUnavailable counts every hold and every cordoned node: an upgrade or
// a switch starts only where every other node is in service, which keeps
// availability hard whatever else holds nodes, but for a node out of
// service already.
func startViolations(sh shape, before, after world) []string {
	var out []string
	for i := range int(after.size) {
		for op := range arbiter.NumOperations {
			if before.n[i].phase(op).Holds() || !after.n[i].phase(op).Holds() || after.n[i].freeHold[op] {
				continue
			}
			// A node out of service already (held by another operation,
			// or cordoned) has no availability to lose.
			availability := (op == arbiter.DriverUpgrade || op == arbiter.ModeSwitch) && !outOfService(&before.n[i])
			if availability {
				pool, down, size := sh.pool(&before.n[i], i), 0, 0
				for j := range int(before.size) {
					if sh.pool(&before.n[j], j) == pool {
						size++
						down += count(j != i && outOfService(&before.n[j]))
					}
				}
				if limit := sh.maxUnavailable(pool, size); down >= limit {
					out = append(out, fmt.Sprintf("the %s started on node %c while %d of pool %q's %d nodes were out of service: "+
						"maxUnavailable of %d was taken", op, 'a'+i, down, pool, size, limit))
				}
			}
			for j := range int(before.size) {
				if j == i || sh.share(op, &before.n[i], i) == 0 || sh.scope(op, &before.n[i], i) != sh.scope(op, &before.n[j], j) {
					continue
				}
				if ph := before.n[j].phase(op); ph.Holds() {
					out = append(out, fmt.Sprintf("the %s started on node %c while it held node %c (%s): its share of 1 was taken",
						op, 'a'+i, 'a'+j, ph))
				}
			}
			// The NVLink domain cap (1) counts over the pools: a start
			// in a domain in service while another is out of service
			// takes a second.
			if d := sh.domain(i); d != "" && !sh.domainOut(&before, d) {
				for j := range int(before.size) {
					if other := sh.domain(j); other != d && outOfService(&before.n[j]) {
						out = append(out, fmt.Sprintf("the %s started on node %c (%s) while node %c put %s out of service: "+
							"maxUnavailableNVLinkDomains of 1 was taken", op, 'a'+i, d, 'a'+j, other))
					}
				}
			}
		}
	}
	return out
}

// outOfService: an operation holds the node, or it is cordoned.
func outOfService(n *node) bool { return held(*n) || n.cordoned() }

// domainOut reports whether a node of the domain is out of service.
func (sh shape) domainOut(w *world, domain string) bool {
	for j := range int(w.size) {
		if sh.domain(j) == domain && outOfService(&w.n[j]) {
			return true
		}
	}
	return false
}

// startable names a queued operation that the table lets start on its
// node and whose every budget (each 1) has room, counted by hand from the
// budgets' rules: no look admits it, and it would wait for ever (issue 52,
// finding 2: a repair held back by its node's upgrade, queued behind a
// full budget). "" when there is none.
func startable(j *judge, w world) string {
	views := make([]arbiter.Node, w.size)
	for i := range views {
		views[i] = j.view(&w, i)
	}
	for i := range views {
		starts, _ := arbiter.Candidates(&views[i])
		for _, s := range starts {
			room := true
			for _, b := range j.p.budgets[s.Op] {
				if b.Counts(&views[i]) {
					continue // counted already: no new place
				}
				for j := range views {
					room = room && (j == i || !b.Counts(&views[j]))
				}
			}
			if room {
				return fmt.Sprintf("node %c: the %s may start (the table allows it, its budgets have room) and waits", 'a'+i, s.Op)
			}
		}
	}
	return ""
}

// cordoned reports whether the node is cordoned, by its upgrade or a
// person.
func (n *node) cordoned() bool { return n.upCordon || n.personCordon }

// held reports whether any operation holds the node.
func held(n node) bool {
	for op := range arbiter.NumOperations {
		if n.phase(op).Holds() {
			return true
		}
	}
	return false
}

// timesOut reports whether the operation's step leaves its state once its
// timeout passed, whatever else the node shows.
func timesOut(n node, op arbiter.Operation) bool {
	n.expired[op] = true
	switch op {
	case arbiter.DriverUpgrade:
		st := n.up.label()
		f := upgrade.Facts{State: st, Since: long, Now: now, Outdated: n.driverOld, GPUPods: count(n.pods)}
		s := upgrade.Next(f, upgradePolicy)
		return s.Next != st || s.Action != upgrade.None
	case arbiter.Repair:
		st := n.rep.label()
		f := remediation.Facts{State: st, Since: long, Now: now, GPUPods: count(n.pods), PluginToReplace: n.repOldPlugin,
			UnhealthyGPUs: 1, DriverReloadable: true, DownstreamPods: 1}
		s := remediation.Next(f, repairPolicy)
		return s.Next != st || s.Action != remediation.None
	case arbiter.ModeSwitch:
		// Whatever the node shows: GPU pods, a plugin and slices left, the
		// new plugin not serving, the pool's mode the switch's target.
		st := n.sw.label()
		f := modeswitch.Facts{State: st, Since: long, Now: now, Current: n.mode.label(), Desired: n.swTarget.label(),
			Target: n.swTarget.label(), Hold: n.swHold.label(), GPUPods: 1, PluginPods: 1, Slices: 1, Requeues: int(n.swRequeues)}
		s := modeswitch.Next(f, switchPolicy)
		return s.Next != st || s.Action != modeswitch.None
	}
	st := n.mig.label()
	f := migreconfig.Facts{State: st, Since: long, Now: now, AttemptSince: long, Desired: n.desired.String(),
		Target: n.migTarget.String(), Applied: n.applied.String(), GPUPods: count(n.pods), ClientPods: 1, ManagerPods: 1,
		Attempt: int(n.migAttempt), Requeues: int(n.migRequeues), ConfigState: gpuv1.MIGConfigPending}
	s := migreconfig.Next(f, migPolicy)
	return s.Next != st || s.Action != migreconfig.None
}

func (n *node) label(op arbiter.Operation) string {
	switch op {
	case arbiter.DriverUpgrade:
		return string(n.up.label())
	case arbiter.Repair:
		return string(n.rep.label())
	case arbiter.ModeSwitch:
		return string(n.sw.label())
	}
	return string(n.mig.label())
}

// final: no operation acts, validates or releases anywhere; an operation
// that stopped failed has a fault to blame; every mark is its holder's; an
// operation still queued waits for one parked (failed, or waiting for a
// reboot or a person) somewhere in the fleet, which holds its place or
// its node: none waits for ever behind nothing (issue 52, finding 7).
func final(j *judge, w world) (bool, string) {
	parked, queued := false, ""
	for i := range w.size {
		for op := range arbiter.NumOperations {
			switch w.n[i].phase(op) {
			case arbiter.Parked:
				parked = true
			case arbiter.Queued:
				queued = fmt.Sprintf("node %c: the %s stays queued (%s) with nothing parked anywhere", 'a'+i, op, w.n[i].label(op))
			}
		}
	}
	if queued != "" && !parked {
		return false, queued
	}
	if why := startable(j, w); why != "" {
		return false, why
	}
	for i := range w.size {
		n := &w.n[i]
		for op := range arbiter.NumOperations {
			switch ph := n.phase(op); {
			case ph == arbiter.Active || ph == arbiter.Validating || ph == arbiter.Releasing:
				return false, fmt.Sprintf("node %c: the %s is still %s (%s)", 'a'+i, op, ph, n.label(op))
			case ph == arbiter.Parked && !n.excused && !(op == arbiter.Repair && n.unhealthy && n.heal == healsNever):
				return false, fmt.Sprintf("node %c: the %s ended %s with no fault to blame", 'a'+i, op, n.label(op))
			}
		}
		// What the operations are for was reached: the node runs the
		// current driver and the MIG layout it should have, its devices
		// made, unless an operation waits to do it or failed.
		if n.phase(arbiter.DriverUpgrade) == arbiter.Idle && (n.driverOld || n.driverGone) {
			return false, fmt.Sprintf("node %c runs an outdated driver (upgrade %s)", 'a'+i, n.label(arbiter.DriverUpgrade))
		}
		if n.phase(arbiter.MIGReconfiguration) == arbiter.Idle && (n.applied != n.desired || n.lost()) && !n.byDRADriver(w.dynamicMIG) {
			return false, fmt.Sprintf("node %c: its MIG layout is not the one it should have, its devices made (%s)", 'a'+i,
				n.label(arbiter.MIGReconfiguration))
		}
		if n.upCordon != n.phase(arbiter.DriverUpgrade).Holds() {
			return false, fmt.Sprintf("node %c: cordoned=%t with the upgrade %s", 'a'+i, n.upCordon, n.label(arbiter.DriverUpgrade))
		}
		if n.repTaint != remediation.Tainted(n.rep.label()) || n.migTaint != migreconfig.Tainted(n.mig.label()) ||
			n.swTaint != modeswitch.Tainted(n.sw.label()) {
			return false, fmt.Sprintf("node %c: a taint outlives its operation", 'a'+i)
		}
		// Every node serves in its pool's mode, or its switch waits for a
		// place or, failed, for a person; none serves in no mode unheld.
		sw := n.phase(arbiter.ModeSwitch)
		if n.mode != w.poolMode && sw != arbiter.Queued && sw != arbiter.Parked {
			return false, fmt.Sprintf("node %c serves in mode %s, its pool's is %s, and its switch is %s", 'a'+i,
				n.mode.label(), w.poolMode.label(), sw)
		}
		if n.mode == noneMode && !sw.Holds() {
			return false, fmt.Sprintf("node %c is in mode none with no switch holding it", 'a'+i)
		}
	}
	return true, ""
}

func describe(w world) string {
	var b strings.Builder
	for i := range w.size {
		n := &w.n[i]
		fmt.Fprintf(&b, "  node %c: unlabelled=%t moved=%t kept=%d upgrade=%q cordon=%t person's cordon=%t repair=%q taint=%t mig=%q taint=%t desired=%s applied=%s lost=%t dynamic=%t "+
			"switch=%q taint=%t target=%s hold=%s mode=%s slices=%t "+
			"driverOld=%t driverGone=%t restarting=%t plugin=%t unhealthy=%t heal=%d pods=%t pdb=%t expired=%v excused=%t\n",
			'a'+i, n.unlabelled, n.moved, n.kept, n.up.label(), n.upCordon, n.personCordon, n.rep.label(), n.repTaint, n.mig.label(), n.migTaint, n.desired, n.applied, n.lost(), n.appliedDynamic,
			n.sw.label(), n.swTaint, n.swTarget.label(), n.swHold.label(), n.mode.label(), n.slices,
			n.driverOld, n.driverGone, n.restarting, n.pluginReady, n.unhealthy, n.heal, n.pods, n.pdb, n.expired, n.excused)
	}
	if w.size > 0 {
		fmt.Fprintf(&b, "  the pool's allocation mode: %s, DynamicMIG %t\n", w.poolMode.label(), w.dynamicMIG)
	}
	return b.String()
}
