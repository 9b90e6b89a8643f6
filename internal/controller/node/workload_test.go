package node

import (
	"errors"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/gpu-operator/gpu-operator/internal/operandpods"
)

func workloadPodIn(name string, phase corev1.PodPhase) *operandpods.Pod {
	p := &operandpods.Pod{Phase: phase}
	p.Name = name
	return p
}

// At most the bound of CUDA workload pods run at once: those the index
// shows running, and those reserved here that it does not show yet. Ended
// and deleted ones free their place; an unseen one frees its place after a
// while, or at once when it was not made.
func TestWorkloadStartsHoldTheBound(t *testing.T) {
	g := NewWithT(t)
	s := &workloadStarts{timeout: time.Minute}
	t0 := time.Date(2026, 12, 6, 12, 0, 0, 0, time.UTC)
	var index []*operandpods.Pod
	list := func() ([]*operandpods.Pod, error) { return index, nil }

	index = []*operandpods.Pod{workloadPodIn("a", corev1.PodRunning), workloadPodIn("b", corev1.PodSucceeded),
		workloadPodIn("c", corev1.PodFailed)}
	g.Expect(s.reserve(list, "d", 2, t0)).To(BeTrue(), "one runs, two ended: a place is free")
	g.Expect(s.reserve(list, "e", 2, t0)).To(BeFalse(), "a runs and d was just made: none is free")

	index = append(index, workloadPodIn("d", corev1.PodSucceeded))
	g.Expect(s.reserve(list, "e", 2, t0)).To(BeTrue(), "d ended once the index showed it")

	deleting := workloadPodIn("f", corev1.PodRunning)
	deleting.DeletionTimestamp = &metav1.Time{Time: t0}
	index = []*operandpods.Pod{deleting}
	g.Expect(s.reserve(list, "g", 1, t0.Add(30*time.Second))).To(BeFalse(), "e is unseen still and holds the one place; f goes")
	g.Expect(s.reserve(list, "g", 1, t0.Add(time.Minute))).To(BeTrue(), "e never showed: its place is freed after a minute")
	s.release("g")
	g.Expect(s.reserve(list, "h", 1, t0.Add(time.Minute))).To(BeTrue(), "g was not made: its place is back")

	_, err := s.reserve(func() ([]*operandpods.Pod, error) { return nil, errors.New("not synced") }, "i", 10, t0)
	g.Expect(err).To(MatchError("not synced"))
	g.Expect(s.unseen).NotTo(HaveKey("i"), "no place is taken without the count")
}
