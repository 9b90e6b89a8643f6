package state

import (
	"cmp"
	"fmt"
	"slices"

	corev1 "k8s.io/api/core/v1"

	gpuv1 "github.com/gpu-operator/gpu-operator/api/v1"
)

// Graph is the validated order of the states.
type Graph struct {
	states []State
	index  map[Name]int
	// labels are the states' node labels (gpuv1.StateLabel), by index:
	// every controller reads them from every node at every reconcile,
	// and building the key each time was an eighth of the status's cost.
	labels []string
}

// NewGraph checks that names are unique and that every state comes after its
// prerequisites, which also rules out cycles, and returns the graph.
func NewGraph(states ...State) (*Graph, error) {
	g := &Graph{states: states, index: make(map[Name]int, len(states))}
	for i, s := range states {
		if _, dup := g.index[s.Name]; dup {
			return nil, fmt.Errorf("state %q is declared twice", s.Name)
		}
		for _, p := range slices.Concat(s.After, s.StartsAfter) {
			if _, ok := g.index[p]; !ok {
				return nil, fmt.Errorf("state %q must come after its prerequisite %q", s.Name, p)
			}
		}
		if s.Operand == nil {
			return nil, fmt.Errorf("state %q has no operand", s.Name)
		}
		if s.Mode != "" && (s.Mode != gpuv1.AllocationDevicePlugin && s.Mode != gpuv1.AllocationDRA || s.Scope != PerNode) {
			return nil, fmt.Errorf("state %q runs in allocation mode %q: only a per-node state has a mode, device-plugin or dra", s.Name, s.Mode)
		}
		g.index[s.Name] = i
		g.labels = append(g.labels, gpuv1.StateLabel(string(s.Name)))
	}
	return g, nil
}

// States returns the states in order: every state after its prerequisites.
func (g *Graph) States() []State { return slices.Clone(g.states) }

// PerNode returns the names of the per-node states, in order.
func (g *Graph) PerNode() []Name {
	var names []Name
	for _, s := range g.states {
		if s.Scope == PerNode {
			names = append(names, s.Name)
		}
	}
	return names
}

// Get returns the state of a name.
func (g *Graph) Get(name Name) (State, bool) {
	i, ok := g.index[name]
	if !ok {
		return State{}, false
	}
	return g.states[i], true
}

// Prerequisites returns every per-node state that must be ready or disabled
// on a node before name may start there, direct or not, in graph order.
// Cluster-wide prerequisites gate nothing per node and are left out.
func (g *Graph) Prerequisites(name Name) []Name {
	seen := map[Name]bool{}
	var visit func(Name)
	visit = func(n Name) {
		s, _ := g.Get(n)
		for _, p := range s.After {
			if !seen[p] {
				seen[p] = true
				visit(p)
			}
		}
	}
	visit(name)
	return g.inOrder(seen, PerNode)
}

// StartPrerequisites returns every per-node state that must be ready or
// disabled on a node before name is first started there: its
// prerequisites, and those it starts after with theirs, in graph order.
func (g *Graph) StartPrerequisites(name Name) []Name {
	s, _ := g.Get(name)
	seen := map[Name]bool{}
	for _, p := range g.Prerequisites(name) {
		seen[p] = true
	}
	for _, p := range s.StartsAfter {
		seen[p] = true
		for _, q := range g.Prerequisites(p) {
			seen[q] = true
		}
	}
	return g.inOrder(seen, PerNode)
}

// Downstream returns every per-node state that has name among its
// prerequisites, direct or not, in graph order.
func (g *Graph) Downstream(name Name) []Name {
	seen := map[Name]bool{}
	for _, s := range g.states {
		for _, p := range s.After {
			if p == name || seen[p] {
				seen[s.Name] = true
			}
		}
	}
	return g.inOrder(seen, PerNode)
}

func (g *Graph) inOrder(set map[Name]bool, scope Scope) []Name {
	var names []Name
	for _, s := range g.states {
		if set[s.Name] && s.Scope == scope {
			names = append(names, s.Name)
		}
	}
	return names
}

// Gate returns the node affinity a per-node state's pods require: a GPU
// node, not opted out of operands, the operand's deploy label "true", and
// every prerequisite ready or disabled. The DaemonSet controller therefore
// starts the state on a node exactly when the states before it are ready
// there, and removes it when one of them stops being ready.
func (g *Graph) Gate(name Name) []corev1.NodeSelectorRequirement {
	s, ok := g.Get(name)
	if !ok || s.Scope != PerNode {
		return nil
	}
	reqs := []corev1.NodeSelectorRequirement{
		{Key: gpuv1.LabelGPUPresent, Operator: corev1.NodeSelectorOpIn, Values: []string{gpuv1.LabelTrue}},
		{Key: gpuv1.LabelDeployOperands, Operator: corev1.NodeSelectorOpNotIn, Values: []string{"false"}},
		{Key: gpuv1.DeployLabel(string(name)), Operator: corev1.NodeSelectorOpIn, Values: []string{gpuv1.LabelTrue}},
	}
	for _, p := range g.Prerequisites(name) {
		reqs = append(reqs, g.upRequirement(p))
	}
	if r, ok := modeRequirement(s.Mode); ok {
		reqs = append(reqs, r)
	}
	return reqs
}

// modeRequirement selects the nodes in a state's allocation mode. The
// device plugin's side excludes dra and none rather than requiring
// device-plugin: a node the operator has not labelled with a mode yet
// (every node, when an operator without modes is upgraded) keeps its
// device plugin, and no GPU pod loses its GPUs.
func modeRequirement(m gpuv1.AllocationMode) (corev1.NodeSelectorRequirement, bool) {
	switch m {
	case gpuv1.AllocationDRA:
		return corev1.NodeSelectorRequirement{Key: gpuv1.LabelAllocationMode, Operator: corev1.NodeSelectorOpIn,
			Values: []string{string(gpuv1.AllocationDRA)}}, true
	case gpuv1.AllocationDevicePlugin:
		return corev1.NodeSelectorRequirement{Key: gpuv1.LabelAllocationMode, Operator: corev1.NodeSelectorOpNotIn,
			Values: []string{string(gpuv1.AllocationDRA), string(gpuv1.AllocationNone)}}, true
	}
	return corev1.NodeSelectorRequirement{}, false
}

// GateEither returns the alternatives that must hold beside Gate for a
// state that starts after others (StartsAfter): those states up, for its
// first start, or the state itself ready on the node, so that its pod
// stays when they leave. Nil for any other state.
func (g *Graph) GateEither(name Name) [][]corev1.NodeSelectorRequirement {
	s, ok := g.Get(name)
	if !ok || s.Scope != PerNode || len(s.StartsAfter) == 0 {
		return nil
	}
	var start []corev1.NodeSelectorRequirement
	always := g.Prerequisites(name)
	for _, p := range g.StartPrerequisites(name) {
		if !slices.Contains(always, p) {
			start = append(start, g.upRequirement(p))
		}
	}
	keep := []corev1.NodeSelectorRequirement{{
		Key: gpuv1.StateLabel(string(name)), Operator: corev1.NodeSelectorOpIn, Values: []string{string(gpuv1.StateReady)},
	}}
	return [][]corev1.NodeSelectorRequirement{start, keep}
}

// upRequirement selects the nodes on which a state is up: ready or
// disabled, or not labelled yet for a state that gates only once labelled.
func (g *Graph) upRequirement(name Name) corev1.NodeSelectorRequirement {
	req := corev1.NodeSelectorRequirement{
		Key:      gpuv1.StateLabel(string(name)),
		Operator: corev1.NodeSelectorOpIn,
		Values:   []string{string(gpuv1.StateDisabled), string(gpuv1.StateReady)},
	}
	if s, _ := g.Get(name); s.GatesOnlyWhenLabelled {
		req.Operator = corev1.NodeSelectorOpNotIn
		req.Values = []string{string(gpuv1.StateFailed), string(gpuv1.StatePending), string(gpuv1.StateUpgrading)}
	}
	return req
}

// ValueOf is a per-node state's value on a node from its label, the value
// of a node without the label included: pending, or disabled for a state
// that gates only once labelled.
func (g *Graph) ValueOf(name Name, labels map[string]string) gpuv1.StateValue {
	i, known := g.index[name]
	if !known {
		// No state of the graph: its label, or pending.
		return cmp.Or(gpuv1.StateValue(labels[gpuv1.StateLabel(string(name))]), gpuv1.StatePending)
	}
	if v := gpuv1.StateValue(labels[g.labels[i]]); v != "" {
		return v
	}
	if g.states[i].GatesOnlyWhenLabelled {
		return gpuv1.StateDisabled
	}
	return gpuv1.StatePending
}

// AllUp says whether every per-node state is up (ready or disabled) on a
// node with these labels: the node's GPU stack is complete.
func (g *Graph) AllUp(labels map[string]string) bool {
	for _, s := range g.states {
		if s.Scope == PerNode && !g.ValueOf(s.Name, labels).Up() {
			return false
		}
	}
	return true
}

// Enabled says, for every state, whether the policy deploys it.
func (g *Graph) Enabled(spec *gpuv1.ClusterPolicySpec) map[Name]bool {
	enabled := make(map[Name]bool, len(g.states))
	for _, s := range g.states {
		enabled[s.Name] = s.Operand.Enabled(spec)
	}
	return enabled
}
