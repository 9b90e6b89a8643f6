package maintenance

import (
	"context"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	gpuv1 "github.com/gpu-operator/gpu-operator/api/v1"
	"github.com/gpu-operator/gpu-operator/internal/migconfig"
	"github.com/gpu-operator/gpu-operator/internal/operandpods"
	"github.com/gpu-operator/gpu-operator/internal/state/migmanager"
	"github.com/gpu-operator/gpu-operator/internal/test/fixture"
)

// Finding 6 of issue 25: an attempt's word is its own pod's, known by the
// pod's UID, not by comparing the pod's creation time with the operator's
// clock (which may run ahead of the API server's, so that every success
// was ignored); a pod that replaced the attempt's, or one of an attempt
// before still terminating, does not speak for it.
func TestMIGAttemptIsItsPods(t *testing.T) {
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	attempt := func(annotations map[string]string) *corev1.Node {
		n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n", Labels: map[string]string{
			gpuv1.LabelMIGReconfigureState: string(gpuv1.MIGApply), gpuv1.LabelMIGConfig: "all-1g.18gb",
			gpuv1.LabelMIGConfigState: gpuv1.MIGConfigSuccess,
		}, Annotations: map[string]string{
			AnnotationMIGTarget: "all-1g.18gb", AnnotationMIGAttempt: "1",
			// The operator's clock ran ahead: the attempt started "after"
			// its pod was created.
			AnnotationMIGAttemptSince: now.Add(2 * time.Second).Format(time.RFC3339),
		}}}
		for k, v := range annotations {
			n.Annotations[k] = v
		}
		return n
	}
	pod := func(uid string, terminating bool) *operandpods.Pod {
		p := &operandpods.Pod{}
		p.UID, p.CreationTimestamp = types.UID(uid), metav1.NewTime(now)
		if terminating {
			p.DeletionTimestamp = &metav1.Time{Time: now}
		}
		return p
	}
	tests := map[string]struct {
		node       *corev1.Node
		pods       []*operandpods.Pod
		word       string
		bind       string
		podGone    bool
		managerPod int
	}{
		"the first pod, alone: the attempt's":      {node: attempt(nil), pods: []*operandpods.Pod{pod("p1", false)}, word: "success", bind: "p1", managerPod: 1},
		"the attempt's pod, its clock behind ours": {node: attempt(map[string]string{AnnotationMIGAttemptPod: "p1"}), pods: []*operandpods.Pod{pod("p1", false)}, word: "success", managerPod: 1},
		"a pod that replaced the attempt's":        {node: attempt(map[string]string{AnnotationMIGAttemptPod: "p1"}), pods: []*operandpods.Pod{pod("p2", false)}, podGone: true, managerPod: 1},
		"the attempt's pod gone":                   {node: attempt(map[string]string{AnnotationMIGAttemptPod: "p1"}), podGone: true},
		"a pod of an attempt before still going":   {node: attempt(nil), pods: []*operandpods.Pod{pod("p0", true), pod("p1", false)}, managerPod: 2},
		"no pod yet":                               {node: attempt(nil)},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			g := NewWithT(t)
			obs := &observed{migClients: map[string]int{}, migManagers: map[string]*operandpods.Pod{}, migManagerPods: map[string]int{}}
			for _, p := range tt.pods {
				obs.migManagerPods["n"]++
				if p.DeletionTimestamp == nil {
					obs.migManagers["n"] = p
				}
			}
			file, err := migconfig.Parse(migmanager.DefaultConfig)
			g.Expect(err).NotTo(HaveOccurred())
			p := &pass{r: &Reconciler{Timers: fixture.Timers()}, cp: &gpuv1.ClusterPolicy{}, obs: obs, now: now, sel: &podSelectors{},
				configs: migConfigs{file: file}}
			f, bind, err := p.r.migFacts(context.Background(), p, tt.node)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(f.ConfigState).To(Equal(tt.word))
			g.Expect(bind).To(Equal(tt.bind))
			g.Expect(f.AttemptPodGone).To(Equal(tt.podGone))
			g.Expect(f.ManagerPods).To(Equal(tt.managerPod))
		})
	}
}
