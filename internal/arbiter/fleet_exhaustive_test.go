package arbiter_test

import (
	"flag"
	"fmt"
	"strings"
	"testing"
	"time"
)

// fleets are the fleets the exhaustive check explores, as nodes:faults
// pairs: how many nodes, and how many faults may happen on the way,
// besides one change of the driver's spec and one of a node's MIG
// configuration.
var fleets = flag.String("fleets", "3:1,2:2,2:1:2", "the exhaustive check's fleets, nodes:faults[:mode changes], separated by commas")

// The three node operations together, on a fleet of three nodes in one
// pool with every budget 1: every state reachable with up to -fleet-faults
// faults (GPUs turning unhealthy and healing by a repair, a reboot, a
// reboot-required node rebooted, a PodDisruptionBudget holding the GPU
// pods then letting go, a GPU pod scheduled, mig-manager failing or
// crashing, a step timing out early, a write conflicting, the operator
// killed in the middle of a look and restarted from the nodes' labels),
// one change of the driver's spec and one of a node's MIG configuration.
// In every state: the budgets hold, at most one operation acts on a node,
// every step that acts or validates has a timeout. Under fair progress
// (looks, pods replaced, mig-manager applying, kured rebooting, a stuck
// step timing out) every node gets to a final state, its cordon and
// taints gone, or failed with a fault to blame: no state waits for ever,
// no cycle of steps goes on for ever. Once faults and changes stop, every
// path of progress settles within a bound it prints (settleBound): every
// queued operation is admitted or told why not within that many moves.
func TestNoNodeCanWedge(t *testing.T) {
	for _, fleet := range strings.Split(*fleets, ",") {
		var nodes, faults, modeChanges uint8
		parts := strings.Split(fleet, ":")
		_, err := fmt.Sscanf(strings.Join(parts[:min(2, len(parts))], ":"), "%d:%d", &nodes, &faults)
		if err == nil && len(parts) == 3 {
			_, err = fmt.Sscanf(parts[2], "%d", &modeChanges)
		}
		if err != nil || len(parts) > 3 || nodes < 1 || nodes > fleetSize {
			t.Fatalf("-fleets: %q is not nodes:faults[:mode changes] with 1 to %d nodes", fleet, fleetSize)
		}
		t.Run(fmt.Sprintf("%d nodes, %d faults, %d mode changes", nodes, faults, modeChanges), func(t *testing.T) {
			checkFleet(t, nodes, faults, modeChanges)
		})
	}
}

func checkFleet(t *testing.T, nodes, faults, modeChanges uint8) {
	start := time.Now()
	e := explore(t, initial(nodes, faults, modeChanges), 3_000_000)
	progress := 0
	for id := range e.states {
		if len(e.progress(int32(id))) > 0 {
			progress++
			continue
		}
		if ok, why := final(e.states[id]); !ok {
			t.Fatalf("a state waits for ever: %s\nin:\n%s\nreached by:\n%s", why, describe(e.states[id]), e.path(int32(id)))
		}
	}
	if cycles := e.livelocks(); len(cycles) > 0 {
		c := cycles[0]
		t.Fatalf("%d cycles of progress never end; one of %d states, entered by:\n%s\nat:\n%s", len(cycles), len(c),
			e.path(c[0]), describe(e.states[c[0]]))
	}
	bound, onCycle, ok := e.settleBound(func(w *world) bool {
		return w.faults == 0 && w.specChanges == 0 && w.migChanges == 0 && w.modeChanges == 0
	})
	if !ok {
		t.Fatalf("once faults stop, progress can go round a cycle: no bound on when the fleet settles; a state on it, reached by:\n%s\nat:\n%s",
			e.path(onCycle), describe(e.states[onCycle]))
	}
	t.Logf("states explored: %d (%d with progress to make) in %s; once faults and changes stop, the fleet settles within %d moves on every path",
		len(e.states), progress, time.Since(start).Round(time.Millisecond), bound)
}
