package maintenance

import (
	"fmt"

	gpuv1 "github.com/gpu-operator/gpu-operator/api/v1"
	"github.com/gpu-operator/gpu-operator/internal/arbiter"
)

// move is a transition of the model: a look of the controller, or
// something that happens between two looks.
type move struct {
	name moveName
	// progress: it happens on its own, fairly (the controller's looks,
	// the DaemonSet replacing a pod, kured rebooting a node marked
	// reboot-required, a timeout of a step that nothing else moves);
	// otherwise it is a fault or a change someone makes, bounded.
	progress bool
	to       world
}

// moveName names a move: what happens, on a node or the fleet (node -1).
// It is formatted only when a path or a livelock is told: a name made
// for each of the tens of millions of moves was a tenth of the check.
type moveName struct {
	what string
	node int8
}

func (m moveName) String() string {
	if m.node < 0 {
		return m.what
	}
	return fmt.Sprintf("%s on node %c", m.what, 'a'+m.node)
}

// Names of the moves made for each value, kept once.
var (
	unhealthyNames = func() (out [healsNever + 1]string) {
		for h := range out {
			out[h] = fmt.Sprintf("GPUs turn unhealthy (heal %d)", h)
		}
		return out
	}()
	earlyTimeoutNames, timeoutNames = func() (early, late [arbiter.NumOperations]string) {
		for op := range arbiter.NumOperations {
			early[op], late[op] = fmt.Sprintf("the %s's step times out early", op), fmt.Sprintf("the %s's step times out", op)
		}
		return early, late
	}()
)

// moves are every transition from w.
func (w world) moves(j *judge) []move {
	var out []move
	add := func(name moveName, progress bool, to world) {
		unexcuse(&to)
		out = append(out, move{name, progress, to})
	}
	fleet := func(s string) moveName { return moveName{s, -1} }
	look := w.pass(j, -1, -1)
	add(fleet("look"), true, look)
	for i := range int(w.size) {
		n := &w.n[i]
		at := func(s string) moveName { return moveName{s, int8(i)} }
		change := func(f func(n *node)) world {
			next := w
			f(&next.n[i])
			return next
		}
		// What the cluster does on its own.
		if n.driverGone {
			add(at("the DaemonSet replaces the driver pod"), true, change(func(n *node) {
				n.driverGone, n.driverOld, n.restarting = false, false, true
				n.driverPodGen, n.gen = (n.driverPodGen+1)%4, (n.gen+1)%4
				if n.heal == healsOnDriverReload {
					n.unhealthy = false
				}
			}))
		}
		if n.restarting && !n.driverGone {
			add(at("the GPU stack comes back"), true, change(func(n *node) { n.restarting = false }))
		}
		if n.mig.label() == gpuv1.MIGApply && n.migPod == 0 && !n.driverGone {
			add(at("mig-manager starts"), true, change(func(n *node) { n.migPod = 1 }))
		}
		if n.migPod == 1 && n.migWord == pendingWord {
			add(at("mig-manager applies"), true, change(func(n *node) { n.migWord = successWord }))
		}
		if n.mig.label() != gpuv1.MIGApply && n.migPod != 0 {
			add(at("mig-manager leaves"), true, change(func(n *node) { n.migPod = 0 }))
		}
		if n.pdb {
			add(at("the PodDisruptionBudget lets go"), true, change(func(n *node) { n.pdb = false }))
		}
		if n.unlabelled {
			add(at("the node controller writes its deploy labels back"), true, change(func(n *node) { n.unlabelled = false }))
		}
		if n.personCordon {
			// A person who cordoned a node uncordons it in the end: the
			// upgrades and switches of its pool wait for that.
			add(at("the person uncordons it"), true, change(func(n *node) { n.personCordon = false }))
		}
		if n.mig.label() == gpuv1.MIGReconfigureDone && !n.expired[arbiter.MIGReconfiguration] {
			// Time: the kubelet's grace for the resource a MIG change
			// replaced (timers.KubeletResourceGrace, minutes) passes,
			// whatever else happens meanwhile; no repair starts on the
			// node before (migJustDone).
			add(at("the kubelet's grace after the MIG change passes"), true,
				change(func(n *node) { n.expired[arbiter.MIGReconfiguration] = true }))
		}
		if n.slices && !(n.mode == draMode && n.pluginReady) {
			// The kubelet deletes the slices of a plugin gone for a while.
			add(at("the kubelet deletes the DRA driver's slices"), true, change(func(n *node) { n.slices = false }))
		}
		if n.rep.label() == gpuv1.RemediationRebootRequired && n.repBootGen == n.bootGen {
			// kured reboots a node marked reboot-required, once a period
			// (an hour): the operator has looked at it long before.
			add(at("kured reboots it"), true, change(reboot))
		}
		// Faults and changes, bounded.
		if w.faults > 0 {
			fault := func(name string, f func(n *node)) {
				next := change(f)
				next.faults--
				add(at(name), false, next)
			}
			if !n.unhealthy {
				for h := healsOnPluginRestart; h <= healsNever; h++ {
					fault(unhealthyNames[h], func(n *node) {
						// Unhealthy again in the middle of a repair, the
						// repair may end failed.
						n.unhealthy, n.heal = true, h
						n.excused = n.excused || n.phase(arbiter.Repair).Holds()
					})
				}
			}
			fault("the node reboots", reboot)
			if n.pods && !n.pdb {
				fault("a PodDisruptionBudget holds its GPU pods", func(n *node) { n.pdb, n.excused = true, true })
			}
			if j.flaps && !n.unlabelled {
				fault("its labels flap", func(n *node) { n.unlabelled = true })
			}
			if j.cordons && !n.personCordon {
				fault("a person cordons it", func(n *node) { n.personCordon = true })
			}
			if !n.pods && !n.upCordon && !n.personCordon && !n.repTaint && !n.migTaint && !n.swTaint && n.mode != noneMode {
				fault("a GPU pod is scheduled", func(n *node) { n.pods = true })
			}
			if n.migPod == 1 && n.migWord == pendingWord {
				fault("mig-manager reports failed", func(n *node) { n.migWord, n.excused = failedWord, true })
			}
			if n.migPod == 1 && n.migBound {
				fault("mig-manager crashes and is replaced", func(n *node) { n.migPod, n.excused = 2, true })
			}
			for op := range arbiter.NumOperations {
				if timed(n, op) && !n.expired[op] {
					fault(earlyTimeoutNames[op], func(n *node) { n.expired[op], n.excused = true, true })
				}
			}
			next := w.pass(j, i, -1)
			next.faults--
			add(at("a look whose writes conflict"), false, next)
			next = w.pass(j, -1, i)
			next.faults--
			add(at("a look cut after its first write"), false, next)
		}
		if w.poolMoves > 0 {
			next := change(func(n *node) { n.moved = !n.moved })
			next.poolMoves--
			add(at("a person moves it to the other driver pool"), false, next)
		}
		if w.migChanges > 0 {
			next := change(func(n *node) {
				n.desired = map[config]config{whole: partitioned, partitioned: whole}[n.desired]
			})
			next.migChanges--
			add(at("a person changes its MIG configuration"), false, next)
		}
	}
	if w.modeChanges > 0 {
		next := w
		next.poolMode = map[mode]mode{dpMode: draMode, draMode: dpMode}[w.poolMode]
		next.modeChanges--
		add(fleet("a person changes the pool's allocation mode"), false, next)
	}
	if w.dynamicChanges > 0 {
		next := w
		next.dynamicMIG = !w.dynamicMIG
		next.dynamicChanges--
		add(fleet("a person turns the DRA driver's DynamicMIG on or off"), false, next)
	}
	if w.specChanges > 0 {
		next := w
		for i := range next.size {
			if !next.n[i].driverGone {
				next.n[i].driverOld = true
			}
		}
		next.specChanges--
		add(fleet("the driver's spec changes"), false, next)
	}
	// Time: a step nothing else moves runs out of time, the shortest
	// timers first: a failed apply's backoff (seconds) ends long before
	// any step's timeout (minutes).
	if stuck(w, look, out) {
		short := false
		for i := range w.size {
			short = short || backingOff(&w.n[i])
		}
		for i := range w.size {
			for op := range arbiter.NumOperations {
				if timed(&w.n[i], op) && !w.n[i].expired[op] && (!short || op == arbiter.MIGReconfiguration && backingOff(&w.n[i])) {
					next := w
					next.n[i].expired[op] = true
					add(moveName{timeoutNames[op], int8(i)}, true, next)
				}
			}
		}
	}
	return out
}

// unexcuse ends the excuse a fault gave a node once its effect is over:
// every operation on the node idle, no PodDisruptionBudget holding its
// pods, its GPUs healthy. An operation that fails after that has no fault
// to blame (issue 52, finding 7: the excuse lasted for ever).
func unexcuse(w *world) {
	for i := range w.size {
		n := &w.n[i]
		if !n.excused || n.pdb || n.unhealthy {
			continue
		}
		idle := true
		for op := range arbiter.NumOperations {
			idle = idle && n.phase(op) == arbiter.Idle
		}
		if idle {
			n.excused = false
		}
	}
}

// backingOff: mig-manager reported failed and the retry waits for its
// backoff.
func backingOff(n *node) bool {
	return n.mig.label() == gpuv1.MIGApply && n.migPod == 1 && n.migWord == failedWord && !n.expired[arbiter.MIGReconfiguration]
}

func reboot(n *node) {
	n.bootGen, n.gen, n.restarting = (n.bootGen+1)%4, (n.gen+1)%4, true
	// A reboot loads the driver and starts the plugin afresh: it heals
	// what a reload or a plugin restart would.
	if n.heal != healsNever {
		n.unhealthy = false
	}
}

// timed reports whether an operation's step on the node has a timeout.
func timed(n *node, op arbiter.Operation) bool {
	ph := n.phase(op)
	return ph == arbiter.Active || ph == arbiter.Validating
}

// stuck: the look changes nothing and nothing else moves on its own.
func stuck(w, look world, moves []move) bool {
	if look != w {
		return false
	}
	for _, m := range moves {
		if m.progress && m.to != w {
			return false
		}
	}
	return true
}

// initial is a fleet of size nodes at rest: every node serving whole
// GPUs through the device plugin, with GPU pods, on the current driver.
func initial(sh shape) world {
	w := world{size: sh.nodes, faults: sh.faults, specChanges: 1, migChanges: 1, modeChanges: sh.modeChanges, poolMode: dpMode}
	if sh.dynamic {
		w.dynamicChanges = 2
	}
	if sh.moves {
		w.poolMoves = 1
	}
	for i := range sh.nodes {
		w.n[i] = node{desired: whole, applied: whole, served: true, pluginReady: true, pods: true, mode: dpMode}
	}
	return w
}
