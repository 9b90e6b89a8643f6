package imagecheck

import (
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/gpu-operator/gpu-operator/internal/driverpool"
	"github.com/gpu-operator/gpu-operator/internal/operandpods"
	"github.com/gpu-operator/gpu-operator/internal/state"
)

const image = "nvcr.io/nvidia/driver:580-5.15.0-1040-azure-ubuntu22.04"

func gpuNode(name string, isReady bool) *corev1.Node {
	status := corev1.ConditionFalse
	if isReady {
		status = corev1.ConditionTrue
	}
	return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name},
		Status: corev1.NodeStatus{Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: status}}}}
}

func checkPod(node string, mutate func(*operandpods.Pod)) *operandpods.Pod {
	p := &operandpods.Pod{Node: node, State: driverpool.CheckState, Phase: corev1.PodPending,
		Annotations: []state.Annotation{{Key: driverpool.AnnotationImage, Value: image}}}
	if mutate != nil {
		mutate(p)
	}
	return p
}

// A check runs on a ready node, the same every time; a node that ended a
// check without a pull is passed over for a while, and with no other node
// the check waits, saying how long.
func TestPickPassesOverRefusingNodes(t *testing.T) {
	g := NewWithT(t)
	now := time.Date(2026, 12, 2, 8, 0, 0, 0, time.UTC)
	r := &Reconciler{Now: func() time.Time { return now }}
	a, b, c := gpuNode("a", false), gpuNode("b", true), gpuNode("c", true)
	picked, _ := r.pick(image, []*corev1.Node{a, c, b})
	g.Expect(picked.Name).To(Equal("b"), "ready first, then by name")

	refused := checkPod("b", func(p *operandpods.Pod) { p.Phase, p.Reason = corev1.PodFailed, "OutOfpods" })
	g.Expect(r.stale(refused, &wanted{nodes: []*corev1.Node{a, b, c}})).To(BeTrue())
	picked, _ = r.pick(image, []*corev1.Node{a, b, c})
	g.Expect(picked.Name).To(Equal("c"))

	g.Expect(r.stale(checkPod("c", func(p *operandpods.Pod) { p.Phase = corev1.PodFailed }), &wanted{nodes: []*corev1.Node{b, c}})).To(BeTrue())
	picked, wait := r.pick(image, []*corev1.Node{b, c})
	g.Expect(picked).To(BeNil(), "every node refused it lately")
	g.Expect(wait).To(Equal(refusedFor))
	now = now.Add(refusedFor)
	picked, _ = r.pick(image, []*corev1.Node{b, c})
	g.Expect(picked.Name).To(Equal("b"), "tried again once the while is over")
}

// A verdict reached stays where it was reached; a check still waiting moves
// off a node that is no longer a candidate, or not ready while another is.
func TestStaleChecks(t *testing.T) {
	g := NewWithT(t)
	r := &Reconciler{}
	down, up := gpuNode("down", false), gpuNode("up", true)
	both := &wanted{nodes: []*corev1.Node{down, up}}
	pulled := func(p *operandpods.Pod) { p.Phase, p.Pulled = corev1.PodSucceeded, true }
	missing := func(p *operandpods.Pod) { p.Waiting = []operandpods.Waiting{{Reason: "ImagePullBackOff"}} }

	g.Expect(r.stale(checkPod("down", nil), both)).To(BeTrue(), "waiting on a node not ready while a ready one could run it")
	g.Expect(r.stale(checkPod("down", nil), &wanted{nodes: []*corev1.Node{down}})).To(BeFalse(), "no other node")
	g.Expect(r.stale(checkPod("gone", nil), both)).To(BeTrue(), "its node boots another kernel now, or is gone")
	g.Expect(r.stale(checkPod("gone", pulled), both)).To(BeFalse(), "the image was pulled: that stays true")
	g.Expect(r.stale(checkPod("down", missing), both)).To(BeFalse(), "the kubelet keeps retrying the pull")
	g.Expect(r.stale(checkPod("up", pulled), nil)).To(BeTrue(), "no node needs the image")
}

// A check waiting on a node not ready stays there when the only ready node
// refused the image lately: moving it would be picked back at once.
func TestNoChurnBetweenARefusingNodeAndANotReadyOne(t *testing.T) {
	g := NewWithT(t)
	now := time.Date(2026, 12, 2, 8, 0, 0, 0, time.UTC)
	r := &Reconciler{Now: func() time.Time { return now }}
	down, up := gpuNode("down", false), gpuNode("up", true)
	both := &wanted{nodes: []*corev1.Node{down, up}}
	g.Expect(r.stale(checkPod("up", func(p *operandpods.Pod) { p.Phase, p.Reason = corev1.PodFailed, "OutOfpods" }), both)).To(BeTrue())
	picked, _ := r.pick(image, both.nodes)
	g.Expect(picked.Name).To(Equal("down"))
	g.Expect(r.stale(checkPod("down", nil), both)).To(BeFalse(), "no other node would be picked")
	now = now.Add(refusedFor)
	g.Expect(r.stale(checkPod("down", nil), both)).To(BeTrue(), "the ready node may take it again")
}
