package maintenance

import (
	"fmt"
	"slices"
	"strings"
	"testing"
)

// explored is the graph of every state reachable from a start.
type explored struct {
	states []world
	index  map[world]int32
	// progressEdges holds, state after state, each state's progress moves
	// to other states, and enabledNames the progress moves it has (to
	// itself too), by name; a state's run starts at its offset in
	// progressAt and enabledAt. Flat, as states are explored in order: a
	// slice per state was millions of small objects for the collector.
	progressEdges         []edge
	enabledNames          []int32
	progressAt, enabledAt []int32
	names                 map[moveName]int32
	nameList              []moveName
	parent                []int32
	via                   []int32 // the name of the move that first reached each state; -1 for the start
}

// edge is a progress move to another state.
type edge struct{ to, name int32 }

func (e *explored) nameOf(m moveName) int32 {
	id, ok := e.names[m]
	if !ok {
		id = int32(len(e.nameList))
		e.names[m] = id
		e.nameList = append(e.nameList, m)
	}
	return id
}

// explore visits every state reachable from start, checking each, up to
// limit states.
func explore(t *testing.T, j *judge, start world, limit int) *explored {
	t.Helper()
	e := &explored{index: map[world]int32{}, names: map[moveName]int32{}}
	add := func(w world, from, name int32) int32 {
		if id, ok := e.index[w]; ok {
			return id
		}
		id := int32(len(e.states))
		e.index[w] = id
		e.states, e.parent, e.via = append(grow(e.states), w), append(grow(e.parent), from), append(grow(e.via), name)
		return id
	}
	add(start, -1, -1)
	for id := int32(0); int(id) < len(e.states); id++ {
		if len(e.states) > limit {
			t.Fatalf("more than %d states: the model is too large to explore", limit)
		}
		w := e.states[id]
		e.progressAt = append(grow(e.progressAt), int32(len(e.progressEdges)))
		e.enabledAt = append(grow(e.enabledAt), int32(len(e.enabledNames)))
		if v := violations(j, w); len(v) > 0 {
			t.Fatalf("%s\nin:\n%s\nreached by:\n%s", strings.Join(v, "\n"), describe(w), e.path(id))
		}
		for _, m := range w.moves(j) {
			if v := startViolations(j.shape, w, m.to); len(v) > 0 {
				t.Fatalf("%s\nin:\n%s\nreached by:\n%s  %s\n", strings.Join(v, "\n"), describe(m.to), e.path(id), m.name)
			}
			name := e.nameOf(m.name)
			to := add(m.to, id, name)
			if !m.progress {
				continue
			}
			e.enabledNames = append(grow(e.enabledNames), name)
			if to != id {
				e.progressEdges = append(grow(e.progressEdges), edge{to, name})
			}
		}
	}
	e.progressAt = append(e.progressAt, int32(len(e.progressEdges)))
	e.enabledAt = append(e.enabledAt, int32(len(e.enabledNames)))
	return e
}

// progress is a state's progress moves to other states.
func (e *explored) progress(id int32) []edge {
	return e.progressEdges[e.progressAt[id]:e.progressAt[id+1]]
}

// enabled is the progress moves a state has, to itself too, by name.
func (e *explored) enabled(id int32) []int32 {
	return e.enabledNames[e.enabledAt[id]:e.enabledAt[id+1]]
}

// grow doubles a full slice's capacity: append grows a large slice by a
// quarter, and the graph's slices of hundreds of thousands of states were
// copied again and again (a sixth of the check's CPU).
func grow[S ~[]E, E any](s S) S {
	if len(s) < cap(s) {
		return s
	}
	return slices.Grow(s, max(len(s), 1024))
}

// path is how a state was first reached.
func (e *explored) path(id int32) string {
	var steps []string
	for ; id >= 0; id = e.parent[id] {
		name := "start"
		if e.via[id] >= 0 {
			name = e.nameList[e.via[id]].String()
		}
		steps = append(steps, name)
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
			if out := e.progress(f.v); int(f.edge) < len(out) {
				w := out[f.edge].to
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
		for _, ed := range e.progress(v) {
			if in[ed.to] {
				taken[ed.name] = true
			}
		}
	}
	always := map[int32]int{}
	for _, v := range scc {
		for _, name := range e.enabled(v) {
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

// settleBound is how many progress moves a fleet takes, at most, on any
// path, from a calm state (calm: no fault or change left to happen, only
// progress) to one with no progress left: once faults stop, every queued
// operation is admitted or told why not, and every one under way ends,
// within that many moves, whatever order the moves come in (issue 52,
// finding 2). Progress keeps a state calm, so the calm states and their
// progress moves are a graph of their own; ok is false, with a state on
// it, when that graph has a cycle, and no bound holds.
func (e *explored) settleBound(calm func(*world) bool) (bound int, onCycle int32, ok bool) {
	const (
		unseen = iota
		open
		done
	)
	n := len(e.states)
	depth, color := make([]int32, n), make([]uint8, n)
	type frame struct{ v, edge int32 }
	var stack []frame
	for root := range int32(n) {
		if color[root] != unseen || !calm(&e.states[root]) {
			continue
		}
		stack, color[root] = append(stack[:0], frame{root, 0}), open
		for len(stack) > 0 {
			f := &stack[len(stack)-1]
			out := e.progress(f.v)
			if int(f.edge) < len(out) {
				w := out[f.edge].to
				f.edge++
				switch color[w] {
				case unseen:
					color[w] = open
					stack = append(stack, frame{w, 0})
				case open:
					return 0, w, false
				}
				continue
			}
			d := int32(0)
			for _, ed := range out {
				d = max(d, depth[ed.to]+1)
			}
			depth[f.v], color[f.v] = d, done
			bound = max(bound, int(d))
			stack = stack[:len(stack)-1]
		}
	}
	return bound, -1, true
}
