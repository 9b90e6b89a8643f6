package upgrade

import (
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/util/intstr"

	gpuv1 "github.com/gpu-operator/gpu-operator/api/v1"
	"github.com/gpu-operator/gpu-operator/internal/budget"
)

// Node is what admission needs to know about a node of a pool.
type Node struct {
	Name  string
	State gpuv1.UpgradeState
	// Unavailable is true when the node cannot run workloads now: cordoned
	// (by anyone) or not Ready.
	Unavailable bool
	// Waiting is true when the node is upgrade-required and could start.
	Waiting bool
	// Remediating is true while the node is out of service for the repair
	// of its GPUs: it uses the budget as an upgrading node does.
	Remediating bool
}

// Admit returns the waiting nodes that may start their upgrade now, in name
// order: at most maxParallel upgrading at once (0: no limit) and at most
// maxUnavailable nodes of the pool unavailable, counting the ones already
// cordoned or not Ready, and the ones upgrading or being repaired.
func Admit(nodes []Node, maxParallel int32, maxUnavailable intstr.IntOrString) (map[string]bool, error) {
	limit, err := budget.Nodes("driver.upgradePolicy.maxUnavailable", maxUnavailable, len(nodes))
	if err != nil {
		return nil, err
	}
	inProgress, unavailable := 0, 0
	var waiting []Node
	for _, n := range nodes {
		switch {
		case InProgress(n.State) || n.Remediating:
			inProgress++
			unavailable++
		case n.Unavailable:
			unavailable++
		}
		if n.Waiting {
			waiting = append(waiting, n)
		}
	}
	slices.SortFunc(waiting, func(a, b Node) int { return strings.Compare(a.Name, b.Name) })
	admitted := map[string]bool{}
	for _, n := range waiting {
		if maxParallel > 0 && inProgress >= int(maxParallel) {
			break
		}
		// A node already unavailable costs no more availability to upgrade.
		if !n.Unavailable {
			if unavailable >= limit {
				continue
			}
			unavailable++
		}
		inProgress++
		admitted[n.Name] = true
	}
	return admitted, nil
}
