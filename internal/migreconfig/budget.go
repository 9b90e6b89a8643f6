package migreconfig

import (
	"cmp"
	"slices"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/gpu-operator/gpu-operator/internal/budget"
)

// Node is what admission needs to know about a GPU node.
type Node struct {
	Name string
	// Busy is true while the node is out of service for a
	// reconfiguration, a repair or a driver upgrade: it takes a place in
	// the budget.
	Busy bool
	// Waiting is true when the node's reconfiguration could start now.
	Waiting bool
	// Serving is true when the node has GPU capacity to lose. A node that
	// serves none (a new node) starts without a place in the budget.
	Serving bool
	// Lost is true when the node's MIG devices are gone (a reboot, a new
	// driver): it serves none of them, and starts without a place in the
	// budget, as a new node does.
	Lost bool
	// WaitingSince is when the node started waiting: the longest waiting
	// go first, so a node sent back to the queue does not take every
	// place again.
	WaitingSince time.Time
}

// Admit returns the waiting nodes whose reconfiguration may start now:
// those serving no GPUs or whose MIG devices are gone, and, longest waiting first (then by name),
// serving ones while fewer than maxParallel nodes of the fleet are busy.
func Admit(nodes []Node, maxParallel intstr.IntOrString) (map[string]bool, error) {
	limit, err := budget.Nodes("migManager.maxParallel", maxParallel, len(nodes))
	if err != nil {
		return nil, err
	}
	busy := 0
	admitted := map[string]bool{}
	var waiting []Node
	for _, n := range nodes {
		if n.Busy {
			// Held by an upgrade or a repair: in the budget already.
			busy++
		}
		switch {
		case !n.Waiting:
		case !n.Serving || n.Lost:
			admitted[n.Name] = true
		case !n.Busy:
			waiting = append(waiting, n)
		}
	}
	slices.SortFunc(waiting, func(a, b Node) int {
		return cmp.Or(a.WaitingSince.Compare(b.WaitingSince), strings.Compare(a.Name, b.Name))
	})
	for _, n := range waiting {
		if busy >= limit {
			break
		}
		busy++
		admitted[n.Name] = true
	}
	return admitted, nil
}
