package migreconfig

import (
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/gpu-operator/gpu-operator/internal/budget"
)

// Node is what admission needs to know about a GPU node.
type Node struct {
	Name string
	// Busy is true while the node is out of service for a
	// reconfiguration: it takes a place in the budget.
	Busy bool
	// Waiting is true when the node's reconfiguration could start now.
	Waiting bool
	// Serving is true when the node's device plugin is ready: it has GPU
	// capacity to lose. A node that serves none (a new node) starts
	// without a place in the budget.
	Serving bool
}

// Admit returns the waiting nodes whose reconfiguration may start now:
// those serving no GPUs, and, in name order, serving ones while fewer
// than maxParallel nodes of the fleet are busy.
func Admit(nodes []Node, maxParallel intstr.IntOrString) (map[string]bool, error) {
	limit, err := budget.Nodes("migManager.maxParallel", maxParallel, len(nodes))
	if err != nil {
		return nil, err
	}
	busy := 0
	admitted := map[string]bool{}
	var waiting []string
	for _, n := range nodes {
		switch {
		case n.Busy:
			busy++
		case n.Waiting && !n.Serving:
			admitted[n.Name] = true
		case n.Waiting:
			waiting = append(waiting, n.Name)
		}
	}
	slices.SortFunc(waiting, strings.Compare)
	for _, name := range waiting {
		if busy >= limit {
			break
		}
		busy++
		admitted[name] = true
	}
	return admitted, nil
}
