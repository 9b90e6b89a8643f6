package maintenance

import (
	"sync"

	corev1 "k8s.io/api/core/v1"
)

// writes remembers, for each node this process wrote, the version of the
// node its first write of a look was conditional on. A cache that still
// shows that version has not seen the write: admitting starts on it could
// count a node as free that a start of the last look just took (issue
// finding 5), since admission reads every other node from the cache and
// only the node written is conditional on its version. Nothing here must
// survive a restart: a new process's cache is as new as any write of the
// old one.
type writes struct {
	mu   sync.Mutex
	base map[string]string
}

// record notes that a node was written on version base.
func (w *writes) record(node, base string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.base == nil {
		w.base = map[string]string{}
	}
	if _, ok := w.base[node]; !ok {
		w.base[node] = base
	}
}

// behind returns a node whose cached version is still the one a write of
// this process was conditional on, "" when the cache has seen every write.
// A write conditional on a version makes the next one, so any other
// version is the write's or a later one.
func (w *writes) behind(nodes []*corev1.Node) string {
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, n := range nodes {
		if base, ok := w.base[n.Name]; ok && base == n.ResourceVersion {
			return n.Name
		}
	}
	return ""
}

// forget drops the nodes the cache has caught up with, and those gone.
func (w *writes) forget(nodes []*corev1.Node) {
	w.mu.Lock()
	defer w.mu.Unlock()
	seen := map[string]string{}
	for _, n := range nodes {
		seen[n.Name] = n.ResourceVersion
	}
	for name, base := range w.base {
		if rv, ok := seen[name]; !ok || rv != base {
			delete(w.base, name)
		}
	}
}
