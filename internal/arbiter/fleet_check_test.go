package arbiter_test

import (
	"fmt"
	"strings"
	"testing"

	gpuv1 "github.com/gpu-operator/gpu-operator/api/v1"
	"github.com/gpu-operator/gpu-operator/internal/arbiter"
	"github.com/gpu-operator/gpu-operator/internal/migreconfig"
	"github.com/gpu-operator/gpu-operator/internal/remediation"
	"github.com/gpu-operator/gpu-operator/internal/upgrade"
)

// move is a transition of the model: a look of the controller, or
// something that happens between two looks.
type move struct {
	name string
	// progress: it happens on its own, fairly (the controller's looks,
	// the DaemonSet replacing a pod, kured rebooting a node marked
	// reboot-required, a timeout of a step that nothing else moves);
	// otherwise it is a fault or a change someone makes, bounded.
	progress bool
	to       world
}

// moves are every transition from w.
func (w world) moves() []move {
	var out []move
	add := func(name string, progress bool, to world) { out = append(out, move{name, progress, to}) }
	look := w.pass(-1, -1)
	add("look", true, look)
	for i := range int(w.size) {
		n := &w.n[i]
		at := func(s string) string { return fmt.Sprintf("%s on node %c", s, 'a'+i) }
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
					fault(fmt.Sprintf("GPUs turn unhealthy (heal %d)", h), func(n *node) {
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
			if !n.pods && !n.upCordon && !n.repTaint && !n.migTaint {
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
					fault(fmt.Sprintf("the %s's step times out early", op), func(n *node) { n.expired[op], n.excused = true, true })
				}
			}
			next := w.pass(i, -1)
			next.faults--
			add(at("a look whose writes conflict"), false, next)
			next = w.pass(-1, i)
			next.faults--
			add(at("a look cut after its first write"), false, next)
		}
		if w.migChanges > 0 {
			next := change(func(n *node) {
				n.desired = map[config]config{whole: partitioned, partitioned: whole}[n.desired]
			})
			next.migChanges--
			add(at("a person changes its MIG configuration"), false, next)
		}
	}
	if w.specChanges > 0 {
		next := w
		for i := range next.size {
			if !next.n[i].driverGone {
				next.n[i].driverOld = true
			}
		}
		next.specChanges--
		add("the driver's spec changes", false, next)
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
					add(fmt.Sprintf("the %s's step on node %c times out", op, 'a'+i), true, next)
				}
			}
		}
	}
	return out
}

// backingOff: mig-manager reported failed and the retry waits for its
// backoff.
func backingOff(n *node) bool {
	return n.mig.label() == gpuv1.MIGApply && n.migPod == 1 && n.migWord == failedWord && !n.expired[arbiter.MIGReconfiguration]
}

func reboot(n *node) {
	n.bootGen, n.gen, n.restarting = (n.bootGen+1)%4, (n.gen+1)%4, true
	if n.heal == healsOnReboot {
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
// GPUs, with GPU pods, on the current driver.
func initial(size, faults uint8) world {
	w := world{size: size, faults: faults, specChanges: 1, migChanges: 1}
	for i := range size {
		w.n[i] = node{desired: whole, applied: whole, served: true, pluginReady: true, pods: true}
	}
	return w
}

// violations are what a state breaks, in a person's words.
func violations(w world) []string {
	var out []string
	// Every budget is 1: no operation holds more than one node but where
	// it started free (a MIG reconfiguration of a node serving nothing).
	// Each budget counts the others' acting too (startViolations).
	for op := range arbiter.NumOperations {
		held := 0
		for i := range w.size {
			if n := &w.n[i]; n.phase(op).Holds() && !n.freeHold[op] {
				held++
			}
		}
		if held > 1 {
			out = append(out, fmt.Sprintf("the %s holds %d nodes, its budget 1", op, held))
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
// starts: every budget is 1 and counts each node any operation acts on,
// and those its own operation left parked, so an operation that starts on
// a node (other than free) found every other node in service. That is
// what makes maxParallelUpgrades the most nodes out of service at once
// while upgrades run, whatever else holds nodes.
func startViolations(before, after world) []string {
	var out []string
	for i := range after.size {
		for op := range arbiter.NumOperations {
			if before.n[i].phase(op).Holds() || !after.n[i].phase(op).Holds() || after.n[i].freeHold[op] {
				continue
			}
			for j := range before.size {
				if j == i {
					continue
				}
				for other := range arbiter.NumOperations {
					ph := before.n[j].phase(other)
					if ph == arbiter.Active || ph == arbiter.Validating || ph == arbiter.Releasing || (other == op && ph == arbiter.Parked) {
						out = append(out, fmt.Sprintf("the %s started on node %c while the %s held node %c (%s): its budget of 1 was taken",
							op, 'a'+i, other, 'a'+j, ph))
					}
				}
			}
		}
	}
	return out
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
	}
	return string(n.mig.label())
}

// final: no operation acts, validates or releases anywhere; an operation
// that stopped failed has a fault to blame; every mark is its holder's.
func final(w world) (bool, string) {
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
		if n.upCordon != n.phase(arbiter.DriverUpgrade).Holds() {
			return false, fmt.Sprintf("node %c: cordoned=%t with the upgrade %s", 'a'+i, n.upCordon, n.label(arbiter.DriverUpgrade))
		}
		if n.repTaint != remediation.Tainted(n.rep.label()) || n.migTaint != migreconfig.Tainted(n.mig.label()) {
			return false, fmt.Sprintf("node %c: a taint outlives its operation", 'a'+i)
		}
	}
	return true, ""
}

func describe(w world) string {
	var b strings.Builder
	for i := range w.size {
		n := &w.n[i]
		fmt.Fprintf(&b, "  node %c: upgrade=%q cordon=%t repair=%q taint=%t mig=%q taint=%t desired=%s applied=%s lost=%t "+
			"driverOld=%t driverGone=%t restarting=%t plugin=%t unhealthy=%t heal=%d pods=%t pdb=%t expired=%v excused=%t\n",
			'a'+i, n.up.label(), n.upCordon, n.rep.label(), n.repTaint, n.mig.label(), n.migTaint, n.desired, n.applied, n.lost(),
			n.driverOld, n.driverGone, n.restarting, n.pluginReady, n.unhealthy, n.heal, n.pods, n.pdb, n.expired, n.excused)
	}
	return b.String()
}

// explored is the graph of every state reachable from a start.
type explored struct {
	states []world
	index  map[world]int32
	// progress holds, for each state, its progress moves to other states;
	// enabled, the progress moves it has (to itself too), by name.
	progress [][]edge
	enabled  [][]int32
	names    map[string]int32
	parent   []int32
	via      []string
}

// edge is a progress move to another state.
type edge struct{ to, name int32 }

func (e *explored) nameOf(s string) int32 {
	id, ok := e.names[s]
	if !ok {
		id = int32(len(e.names))
		e.names[s] = id
	}
	return id
}

// explore visits every state reachable from start, checking each, up to
// limit states.
func explore(t *testing.T, start world, limit int) *explored {
	t.Helper()
	e := &explored{index: map[world]int32{}, names: map[string]int32{}}
	add := func(w world, from int32, name string) int32 {
		if id, ok := e.index[w]; ok {
			return id
		}
		id := int32(len(e.states))
		e.index[w] = id
		e.states, e.parent, e.via = append(e.states, w), append(e.parent, from), append(e.via, name)
		e.progress, e.enabled = append(e.progress, nil), append(e.enabled, nil)
		return id
	}
	add(start, -1, "start")
	for id := int32(0); int(id) < len(e.states); id++ {
		if len(e.states) > limit {
			t.Fatalf("more than %d states: the model is too large to explore", limit)
		}
		w := e.states[id]
		if v := violations(w); len(v) > 0 {
			t.Fatalf("%s\nin:\n%s\nreached by:\n%s", strings.Join(v, "\n"), describe(w), e.path(id))
		}
		for _, m := range w.moves() {
			if v := startViolations(w, m.to); len(v) > 0 {
				t.Fatalf("%s\nin:\n%s\nreached by:\n%s  %s\n", strings.Join(v, "\n"), describe(m.to), e.path(id), m.name)
			}
			to := add(m.to, id, m.name)
			if !m.progress {
				continue
			}
			name := e.nameOf(m.name)
			e.enabled[id] = append(e.enabled[id], name)
			if to != id {
				e.progress[id] = append(e.progress[id], edge{to, name})
			}
		}
	}
	return e
}

// path is how a state was first reached.
func (e *explored) path(id int32) string {
	var steps []string
	for ; id >= 0; id = e.parent[id] {
		steps = append(steps, e.via[id])
	}
	var b strings.Builder
	for i := len(steps) - 1; i >= 0; i-- {
		fmt.Fprintf(&b, "  %s\n", steps[i])
	}
	return b.String()
}

// livelocks returns the fair cycles of progress moves: progress that never
// ends although every move that stays possible is taken (weak fairness:
// a component of states is a fair cycle when each move possible in all
// of its states is one of its own edges). It is Tarjan's strongly
// connected components, iterative.
func (e *explored) livelocks() [][]int32 {
	n := len(e.states)
	index, low := make([]int32, n), make([]int32, n)
	for i := range index {
		index[i] = -1
	}
	onStack := make([]bool, n)
	var stack []int32
	var out [][]int32
	next := int32(0)
	type frame struct{ v, edge int32 }
	for root := int32(0); int(root) < n; root++ {
		if index[root] >= 0 {
			continue
		}
		calls := []frame{{root, 0}}
		index[root], low[root] = next, next
		next++
		stack, onStack[root] = append(stack, root), true
		for len(calls) > 0 {
			f := &calls[len(calls)-1]
			if int(f.edge) < len(e.progress[f.v]) {
				w := e.progress[f.v][f.edge].to
				f.edge++
				switch {
				case index[w] < 0:
					index[w], low[w] = next, next
					next++
					stack, onStack[w] = append(stack, w), true
					calls = append(calls, frame{w, 0})
				case onStack[w]:
					low[f.v] = min(low[f.v], index[w])
				}
				continue
			}
			v := f.v
			calls = calls[:len(calls)-1]
			if len(calls) > 0 {
				low[calls[len(calls)-1].v] = min(low[calls[len(calls)-1].v], low[v])
			}
			if low[v] != index[v] {
				continue
			}
			var scc []int32
			for {
				w := stack[len(stack)-1]
				stack, onStack[w] = stack[:len(stack)-1], false
				scc = append(scc, w)
				if w == v {
					break
				}
			}
			if len(scc) > 1 && e.fair(scc) {
				out = append(out, scc)
			}
		}
	}
	return out
}

// fair reports whether a component of states holds a fair cycle: every
// progress move possible in all of its states is an edge within it.
func (e *explored) fair(scc []int32) bool {
	in := map[int32]bool{}
	for _, v := range scc {
		in[v] = true
	}
	taken := map[int32]bool{}
	for _, v := range scc {
		for _, ed := range e.progress[v] {
			if in[ed.to] {
				taken[ed.name] = true
			}
		}
	}
	always := map[int32]int{}
	for _, v := range scc {
		for _, name := range e.enabled[v] {
			always[name]++
		}
	}
	for name, n := range always {
		if n == len(scc) && !taken[name] {
			return false
		}
	}
	return true
}
