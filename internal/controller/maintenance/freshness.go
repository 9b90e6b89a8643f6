package maintenance

import (
	"context"
	"fmt"
	"sync"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// primePage is how many nodes a page of the first look's live list holds:
// the list is compared page by page, so a large fleet's nodes are never
// all decoded at once beside the cache's.
const primePage = 200

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
// listed after any write of the old one, and a standby that takes over,
// whose cache has run for a while, reads live at its first look the nodes
// its cache has older than the API server (prime).
type writes struct {
	mu   sync.Mutex
	last map[string]*written
}

type written struct {
	node   *corev1.Node
	before map[string]bool
}

// remember records that this process wrote a node at version before,
// and that the API server returned n (writes), trimmed as the cache trims
// nodes; it returns what it recorded.
func (r *Reconciler) remember(before string, n *corev1.Node) *corev1.Node {
	n = r.trim(n)
	r.written.record(before, n)
	return n
}

// trim returns what the cache keeps of a node (TrimNode).
func (r *Reconciler) trim(n *corev1.Node) *corev1.Node {
	if r.TrimNode == nil {
		return n
	}
	return r.TrimNode(n)
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
func (w *writes) current(cached []*corev1.Node) ([]*corev1.Node, int) {
	w.mu.Lock()
	defer w.mu.Unlock()
	nodes := make([]*corev1.Node, len(cached))
	replaced := 0
	listed := make(map[string]bool, len(w.last))
	for i, n := range cached {
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

// prime reads the nodes live, after the cache's list, and takes those the
// cache has at another version as written: the cache was listed first, so
// it can only be behind. A leader that went away may have written them
// just before, and the cache that has not seen it yet would count their
// places as free.
func (r *Reconciler) prime(ctx context.Context, cached []*corev1.Node) error {
	byName := make(map[string]*corev1.Node, len(cached))
	for _, n := range cached {
		byName[n.Name] = n
	}
	cont := ""
	for {
		// A fresh list for each page: a response decoded into the last
		// page's list would keep its continue token where the new one
		// has none, and never end.
		page := &corev1.NodeList{}
		if err := r.APIReader.List(ctx, page, client.Limit(primePage), client.Continue(cont)); err != nil {
			return fmt.Errorf("listing nodes live at the first look: %w", err)
		}
		for i := range page.Items {
			live := &page.Items[i]
			if c := byName[live.Name]; c != nil && c.UID == live.UID && c.ResourceVersion != live.ResourceVersion {
				// The page goes with the loop: kept whole, live is
				// copied out of it; trimmed, trimming copies.
				if r.TrimNode == nil {
					live = live.DeepCopy()
				}
				r.remember(c.ResourceVersion, live)
			}
		}
		if cont = page.Continue; cont == "" {
			return nil
		}
	}
}
