package node

import (
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// A cache that shows a node at a version this process wrote on is behind
// its write, however many writes (labels, then the taint) it made; once it
// shows another version, its own write or a later one, it is the truth
// again, and the node is forgotten.
func TestOwnWritesTellACacheBehindThem(t *testing.T) {
	g := NewWithT(t)
	at := func(name, version string) *corev1.Node {
		return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, ResourceVersion: version}}
	}
	var w ownWrites
	g.Expect(w.behind(at("gpu-1", "5"))).To(BeFalse(), "a node never written")

	w.wrote("gpu-1", "5")
	w.wrote("gpu-1", "6")
	g.Expect(w.behind(at("gpu-1", "5"))).To(BeTrue())
	g.Expect(w.behind(at("gpu-1", "6"))).To(BeTrue(), "the version between the labels and the taint")
	g.Expect(w.behind(at("gpu-2", "5"))).To(BeFalse(), "another node")
	g.Expect(w.behind(at("gpu-1", "7"))).To(BeFalse())
	g.Expect(w.before).NotTo(HaveKey("gpu-1"), "forgotten once the cache caught up")

	w.wrote("gpu-3", "9")
	w.forget("gpu-3")
	g.Expect(w.behind(at("gpu-3", "9"))).To(BeFalse(), "a deleted node is forgotten")
}
