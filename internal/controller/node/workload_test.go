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
// shows running, and those made here that it does not show yet. Ended
// ones free their place; an unseen one frees its place after a while.
func TestWorkloadStartsHoldTheBound(t *testing.T) {
	g := NewWithT(t)
	s := &workloadStarts{timeout: time.Minute}
	t0 := time.Date(2026, 12, 6, 12, 0, 0, 0, time.UTC)
	created := 0
	create := func() error { created++; return nil }

	index := []*operandpods.Pod{workloadPodIn("a", corev1.PodRunning), workloadPodIn("b", corev1.PodSucceeded),
		workloadPodIn("c", corev1.PodFailed)}
	g.Expect(s.place(index, "d", 2, t0, create)).To(BeTrue(), "one runs, two ended: a place is free")
	g.Expect(s.place(index, "e", 2, t0, create)).To(BeFalse(), "a runs and d was just made: none is free")
	g.Expect(created).To(Equal(1))

	index = append(index, workloadPodIn("d", corev1.PodSucceeded))
	g.Expect(s.place(index, "e", 2, t0, create)).To(BeTrue(), "d ended once the index showed it")

	deleting := workloadPodIn("f", corev1.PodRunning)
	deleting.DeletionTimestamp = &metav1.Time{Time: t0}
	index = []*operandpods.Pod{deleting}
	g.Expect(s.place(index, "g", 1, t0.Add(30*time.Second), create)).To(BeFalse(), "e is unseen still and holds the one place; f goes")
	g.Expect(s.place(index, "g", 1, t0.Add(time.Minute), create)).To(BeTrue(), "e never showed: its place is freed after a minute")

	failing := func() error { return errors.New("refused") }
	_, err := s.place(nil, "h", 10, t0.Add(time.Minute), failing)
	g.Expect(err).To(MatchError("refused"))
	g.Expect(s.unseen).NotTo(HaveKey("h"), "a pod not made takes no place")
}
