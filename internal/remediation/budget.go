package remediation

import (
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/gpu-operator/gpu-operator/internal/budget"
)

// Node is what admission needs to know about a GPU node.
type Node struct {
	Name string
	// Busy is true while the node is out of service for a repair or a
	// driver upgrade: it takes a place in the budget.
	Busy bool
	// Waiting is true when the node's repair could start now.
	Waiting bool
}

// Admit returns the waiting nodes whose repair may start now, in name
// order: at most maxParallel nodes of the fleet busy at once, repairs and
// driver upgrades together.
func Admit(nodes []Node, maxParallel intstr.IntOrString) (map[string]bool, error) {
	limit, err := budget.Nodes("operator.remediation.maxParallel", maxParallel, len(nodes))
	if err != nil {
		return nil, err
	}
	busy := 0
	var waiting []string
	for _, n := range nodes {
		switch {
		case n.Busy:
			busy++
		case n.Waiting:
			waiting = append(waiting, n.Name)
		}
	}
	slices.SortFunc(waiting, strings.Compare)
	admitted := map[string]bool{}
	for _, name := range waiting {
		if busy >= limit {
			break
		}
		busy++
		admitted[name] = true
	}
	return admitted, nil
}
