package clusterpolicy

import (
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/event"
)

func TestBeyondStatusDropsStatusOnlyUpdates(t *testing.T) {
	old := &appsv1.DaemonSet{ObjectMeta: metav1.ObjectMeta{Name: "ds", Generation: 1, Labels: map[string]string{"a": "b"}}}
	status := old.DeepCopy()
	status.Status.NumberReady = 7
	status.ResourceVersion = "2"
	relabelled := old.DeepCopy()
	relabelled.Labels = map[string]string{}
	respecced := old.DeepCopy()
	respecced.Generation = 2
	finalized := old.DeepCopy()
	finalized.Finalizers = []string{"x"}

	p := beyondStatus()
	for name, tc := range map[string]struct {
		cur  *appsv1.DaemonSet
		want bool
	}{
		"status only":     {status, false},
		"labels removed":  {relabelled, true},
		"spec changed":    {respecced, true},
		"finalizer added": {finalized, true},
	} {
		if got := p.Update(event.UpdateEvent{ObjectOld: old, ObjectNew: tc.cur}); got != tc.want {
			t.Errorf("%s: passed = %v, want %v", name, got, tc.want)
		}
	}
}
