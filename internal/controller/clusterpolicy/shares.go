package clusterpolicy

import (
	"cmp"
	"fmt"
	"sync"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	gpuv1 "github.com/gpu-operator/gpu-operator/api/v1"
	"github.com/gpu-operator/gpu-operator/internal/gating"
	"github.com/gpu-operator/gpu-operator/internal/state"
)

// nodeShare is what one node adds to the status's summary, read from its
// labels and annotations.
type nodeShare struct {
	uid     types.UID
	version string
	// gpu is false for a node that is no GPU node: it adds nothing.
	gpu       bool
	unhealthy int64
	// waiting is the node's entry among those an operation waits to
	// start on; "" when none waits.
	waiting string
	upgrade gpuv1.UpgradeState
	// operations are the node's maintenance operations and their states
	// there, done excluded.
	operations [][2]string
	// values are the node's value of each per-node state, in the graph's
	// order (Graph.PerNode).
	values []gpuv1.StateValue
	// hostDriver is the node's entry among those that use the driver on
	// their host, should the policy deploy the driver container; "" for
	// a node that does not.
	hostDriver string
	pool       string
}

// shareOf reads a node's share.
func shareOf(g *state.Graph, perNode []state.Name, n *corev1.Node) *nodeShare {
	s := &nodeShare{uid: n.UID, version: n.ResourceVersion, gpu: gating.IsGPUNode(n)}
	if !s.gpu {
		return s
	}
	s.unhealthy = gating.UnhealthyGPUsOf(n)
	if why := n.Annotations[gpuv1.AnnotationMaintenanceWaiting]; why != "" {
		s.waiting = fmt.Sprintf("%s (%s)", n.Name, why)
	}
	s.upgrade = gpuv1.UpgradeState(n.Labels[gpuv1.LabelUpgradeState])
	for _, op := range gating.Operations() {
		if st := op.StateOn(n); st != "" {
			s.operations = append(s.operations, [2]string{op.Name, st})
		}
	}
	s.values = make([]gpuv1.StateValue, len(perNode))
	for i, name := range perNode {
		s.values[i] = g.ValueOf(name, n.Labels)
		if name == state.Driver && s.values[i] == gpuv1.StateDisabled && n.Labels[gpuv1.LabelDeployOperands] != "false" {
			s.hostDriver = fmt.Sprintf("%s (%s)", n.Name, hostDriverReason(n))
		}
	}
	s.pool = cmp.Or(n.Labels[gpuv1.LabelDriverPool], "default")
	return s
}

// shares keeps each node's share between reconciles while the node is
// the same object at the same resourceVersion: a status is computed at
// almost every reconcile of the policy, from every node, and most nodes
// did not change since the last (issue 54: 18% of the operator's CPU
// late in a 5000-node rollout).
type shares struct {
	mu     sync.Mutex
	byNode map[string]*nodeShare
}

// of returns the shares of nodes, read anew for the nodes that changed,
// and forgets the nodes not listed.
func (c *shares) of(g *state.Graph, perNode []state.Name, nodes []*corev1.Node) []*nodeShare {
	c.mu.Lock()
	defer c.mu.Unlock()
	kept := c.byNode
	c.byNode = make(map[string]*nodeShare, len(nodes))
	out := make([]*nodeShare, len(nodes))
	for i := range nodes {
		n := nodes[i]
		s := kept[n.Name]
		if s == nil || s.uid != n.UID || s.version != n.ResourceVersion || n.ResourceVersion == "" {
			s = shareOf(g, perNode, n)
		}
		c.byNode[n.Name] = s
		out[i] = s
	}
	return out
}
