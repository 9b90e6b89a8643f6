package explain

import (
	"cmp"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"

	gpuv1 "github.com/gpu-operator/gpu-operator/api/v1"
	"github.com/gpu-operator/gpu-operator/internal/gating"
	"github.com/gpu-operator/gpu-operator/internal/state"
)

// Fleet is what kubectl gpu status prints: the GPU nodes per driver pool
// and state, those an operation holds, and those that wait.
type Fleet struct {
	GPUNodes int `json:"gpuNodes"`
	// Ready counts the nodes ready (or disabled) on every state.
	Ready   int       `json:"ready"`
	Pools   []Pool    `json:"pools"`
	Held    []Held    `json:"held,omitempty"`
	Waiting []Waiting `json:"waiting,omitempty"`
	States  []string  `json:"states"`
}

// Pool counts a driver pool's nodes by state and value.
type Pool struct {
	Name  string `json:"name"`
	Nodes int    `json:"nodes"`
	Ready int    `json:"ready"`
	// States maps each state to its values' counts (ready, pending,
	// failed, upgrading, disabled).
	States map[string]map[string]int `json:"states"`
}

// Held is a node an operation holds, and where it stands.
type Held struct {
	Node      string    `json:"node"`
	Operation string    `json:"operation"`
	State     string    `json:"state"`
	Since     time.Time `json:"since,omitzero"`
}

// Waiting is a node whose queued operation does not start, and why.
type Waiting struct {
	Node string `json:"node"`
	Why  string `json:"why"`
}

// ForFleet counts the fleet's GPU nodes as their labels say, in graph's
// state order; nodes without a pool count under "default".
func ForFleet(nodes []corev1.Node, graph *state.Graph) Fleet {
	out := Fleet{}
	for _, name := range graph.PerNode() {
		out.States = append(out.States, string(name))
	}
	pools := map[string]*Pool{}
	for i := range nodes {
		n := &nodes[i]
		if !gating.IsGPUNode(n) {
			continue
		}
		out.GPUNodes++
		name := cmp.Or(n.Labels[gpuv1.LabelDriverPool], "default")
		p := pools[name]
		if p == nil {
			p = &Pool{Name: name, States: map[string]map[string]int{}}
			pools[name] = p
		}
		p.Nodes++
		// A missing label reads as the ClusterPolicy's count reads it
		// (state.Graph.ValueOf): pending, or disabled where the state
		// gates only once labelled.
		for _, s := range graph.PerNode() {
			if p.States[string(s)] == nil {
				p.States[string(s)] = map[string]int{}
			}
			p.States[string(s)][string(graph.ValueOf(s, n.Labels))]++
		}
		if graph.AllUp(n.Labels) {
			p.Ready++
			out.Ready++
		}
		for _, o := range operationsOf(n) {
			out.Held = append(out.Held, Held{Node: n.Name, Operation: o.Name, State: o.State, Since: o.Since})
		}
		if w := n.Annotations[gpuv1.AnnotationMaintenanceWaiting]; w != "" {
			out.Waiting = append(out.Waiting, Waiting{Node: n.Name, Why: w})
		}
	}
	for _, p := range pools {
		out.Pools = append(out.Pools, *p)
	}
	slices.SortFunc(out.Pools, func(a, b Pool) int { return cmp.Compare(a.Name, b.Name) })
	slices.SortFunc(out.Held, func(a, b Held) int { return cmp.Or(cmp.Compare(a.Node, b.Node), cmp.Compare(a.Operation, b.Operation)) })
	slices.SortFunc(out.Waiting, func(a, b Waiting) int { return cmp.Compare(a.Node, b.Node) })
	return out
}
