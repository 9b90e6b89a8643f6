package maintenance

import (
	"flag"
	"strings"
	"testing"
	"time"
)

// fleets are the fleets the exhaustive check explores: how many nodes,
// how many faults may happen on the way (besides one change of the
// driver's spec and one of a node's MIG configuration), how many times
// the pool's allocation mode changes, and what else the fleet has
// (shape).
var fleets = flag.String("fleets", "3:1/cordons+flaps,2:2,2:1:2,3:0/pools+moves,3:1/pools+domains+cordons,2:0:2/dynamic",
	"the exhaustive check's fleets, nodes:faults[:mode changes][/cordons+flaps+dynamic+pools+domains+moves], separated by commas")

// The four node operations together, judged by the controller's own view
// of each node (fleet_view_test.go), on small fleets (-fleets): one pool
// with every budget 1, or two driver pools with settings of their own and
// an NVLink domain across them. Every state reachable with up to the
// fleet's faults (GPUs turning unhealthy and healing by a repair, a
// reboot, a reboot-required node rebooted, a PodDisruptionBudget holding
// the GPU pods then letting go, a GPU pod scheduled, mig-manager failing
// or crashing, a step timing out early, a write conflicting, the operator
// killed in the middle of a look and restarted from the nodes' labels; in
// the fleets that have them, a person's cordon, a flap of the node's
// labels), one change of the driver's spec and one of a node's MIG
// configuration. In every state: the shares, maxUnavailable and the
// domain cap hold, at most one operation acts on a node, every step that
// acts or validates has a timeout, no operation under way stops running
// on its node. Under fair progress (looks, pods replaced, mig-manager
// applying, kured rebooting, a person uncordoning, labels written back,
// the kubelet's grace after a MIG change, a stuck step timing out) every
// node gets to a final state, its cordon and taints gone, on the current
// driver and its MIG layout, or failed with a fault to blame: no state
// waits for ever, no cycle of steps goes on for ever. Once faults and
// changes stop, every path of progress settles within a bound it prints
// (settleBound): every queued operation is admitted or told why not
// within that many moves.
func TestNoNodeCanWedge(t *testing.T) {
	for _, fleet := range strings.Split(*fleets, ",") {
		sh, err := parseShape(fleet)
		if err != nil {
			t.Fatalf("-fleets: %v", err)
		}
		t.Run(sh.String(), func(t *testing.T) { checkFleet(t, sh) })
	}
}

func checkFleet(t *testing.T, sh shape) {
	start := time.Now()
	j := newJudge(t, sh)
	e := explore(t, j, initial(sh), 3_000_000)
	progress := 0
	for id := range e.states {
		if len(e.progress(int32(id))) > 0 {
			progress++
			continue
		}
		if ok, why := final(j, e.states[id]); !ok {
			t.Fatalf("a state waits for ever: %s\nin:\n%s\nreached by:\n%s", why, describe(e.states[id]), e.path(int32(id)))
		}
	}
	if cycles := e.livelocks(); len(cycles) > 0 {
		c := cycles[0]
		t.Fatalf("%d cycles of progress never end; one of %d states, entered by:\n%s\nat:\n%s", len(cycles), len(c),
			e.path(c[0]), describe(e.states[c[0]]))
	}
	bound, onCycle, ok := e.settleBound(func(w *world) bool {
		return w.faults == 0 && w.specChanges == 0 && w.migChanges == 0 && w.modeChanges == 0 && w.dynamicChanges == 0 && w.poolMoves == 0
	})
	if !ok {
		t.Fatalf("once faults stop, progress can go round a cycle: no bound on when the fleet settles; a state on it, reached by:\n%s\nat:\n%s",
			e.path(onCycle), describe(e.states[onCycle]))
	}
	t.Logf("states explored: %d (%d with progress to make) in %s; once faults and changes stop, the fleet settles within %d moves on every path",
		len(e.states), progress, time.Since(start).Round(time.Millisecond), bound)
}
