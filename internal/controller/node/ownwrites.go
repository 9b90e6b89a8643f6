package node

import (
	"sync"

	corev1 "k8s.io/api/core/v1"
)

// ownWrites remembers, for each node this process wrote and its cache has
// not shown since, the versions it wrote on. A node the cache still shows
// at one of them is older than this process's own write: deciding on it
// would write the labels just written again, on a version the API server
// refuses with a conflict, every staleRetry until the cache catches up.
// Under load the cache runs seconds behind, and those refused writes
// load the API server further: a 1000-node rollout had 4229 of them in two
// minutes, up to 21 on one node. Nothing here must survive a restart: a
// new process's cache is listed after its predecessor's writes.
type ownWrites struct {
	mu     sync.Mutex
	before map[string]map[string]bool
}

// wrote records a write of the node made on version.
func (w *ownWrites) wrote(node, version string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.before == nil {
		w.before = map[string]map[string]bool{}
	}
	if w.before[node] == nil {
		w.before[node] = map[string]bool{}
	}
	w.before[node][version] = true
}

// behind reports whether the cache shows n at a version this process
// wrote on; once it shows another, the node's versions are forgotten.
func (w *ownWrites) behind(n *corev1.Node) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	versions, ok := w.before[n.Name]
	if !ok {
		return false
	}
	if versions[n.ResourceVersion] {
		return true
	}
	delete(w.before, n.Name)
	return false
}

// forget drops a node that is gone.
func (w *ownWrites) forget(node string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	delete(w.before, node)
}
