package controllertest

import (
	"slices"

	corev1 "k8s.io/api/core/v1"

	"github.com/gpu-operator/gpu-operator/internal/state/gfd"
	"github.com/gpu-operator/gpu-operator/internal/state/nfd"
)

// The simulator's NFD: a node's GFD labels follow GFD only while NFD
// publishes for the node (fakenode.NFDPublishes), and only when its
// nfd-worker scans, which a test may hold.

// GFDLabelsStranded lists the nodes NFD left while GFD's labels it had
// published were still on them.
func (s *Cluster) GFDLabelsStranded() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.stranded)
}

// HoldNFDScan stops (true) or resumes (false) the scans of a node's
// nfd-worker: GFD's labels stay as they are meanwhile, whatever GFD does.
func (s *Cluster) HoldNFDScan(node string, hold bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	defer s.wake()
	s.unscanned[node] = hold
}

// NFDPublishedFor reports whether NFD published for a node at the
// simulator's last step.
func (s *Cluster) NFDPublishedFor(node string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.published[node]
}

// noteNFD records whether NFD publishes for a node now, and the node as
// stranded if NFD just left it with GFD's labels on it. It says whether
// the node's scans are held.
func (s *Cluster) noteNFD(n *corev1.Node, publishes bool) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.published[n.Name] && !publishes && slices.ContainsFunc(nfd.PublishedLabels(n.Annotations), gfd.IsLabel) {
		s.stranded = append(s.stranded, n.Name)
	}
	s.published[n.Name] = publishes
	return s.unscanned[n.Name]
}
