package maintenance

import (
	"sync"

	corev1 "k8s.io/api/core/v1"
)

// writes lets a look read this process's own writes of nodes: for each
// node written and not yet seen in the cache, the node as the last write
// left it (the API server's answer) and every version it was written on.
// Every write of a node records itself here (apply, patchNode,
// tellWaiting), so a start that takes two writes (a taint, then a label)
// records the version between them too. A look that read a node the
// cache still shows at one of those versions would decide on a node older
// than this process's writes: admission could count a place as free that
// a start of the last look took (issue 25, finding 5), and a step would
// write on a version that fails with a conflict. So the look reads the
// written node instead, and decides on the fleet as this process left
// it. A cache at any other version shows the last write or a later one
// (each write was conditional on the version before it, or, for the
// waiting annotation, made on the version the look read), or a version
// someone else wrote just before that unconditional annotation write,
// which holds every conditional write before it: the cache is the truth
// again. Nothing here must survive a restart: a new process's cache is
// listed after any write of the old one (a standby's older cache is a
// known gap).
type writes struct {
	mu   sync.Mutex
	last map[string]*written
}

type written struct {
	node   *corev1.Node
	before map[string]bool
}

// record notes that a node at version before was written, and that the
// API server returned after.
func (w *writes) record(before string, after *corev1.Node) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.last == nil {
		w.last = map[string]*written{}
	}
	e := w.last[after.Name]
	if e == nil {
		e = &written{before: map[string]bool{}}
		w.last[after.Name] = e
	}
	e.before[before] = true
	e.node = after
}

// current returns the cached nodes with those the cache shows from before
// this process's writes replaced by the nodes as written, and drops what
// it remembers of nodes the cache has caught up with, and of nodes gone.
// It reports how many it replaced.
func (w *writes) current(cached []corev1.Node) ([]*corev1.Node, int) {
	w.mu.Lock()
	defer w.mu.Unlock()
	nodes := make([]*corev1.Node, len(cached))
	replaced := 0
	listed := make(map[string]bool, len(w.last))
	for i := range cached {
		n := &cached[i]
		nodes[i] = n
		e := w.last[n.Name]
		if e == nil {
			continue
		}
		listed[n.Name] = true
		if e.before[n.ResourceVersion] && e.node.UID == n.UID {
			nodes[i] = e.node
			replaced++
			continue
		}
		delete(w.last, n.Name)
	}
	for name := range w.last {
		if !listed[name] {
			delete(w.last, name)
		}
	}
	return nodes, replaced
}
