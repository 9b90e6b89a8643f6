package policy

import (
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/event"

	gpuv1 "github.com/gpu-operator/gpu-operator/api/v1"
)

func TestSpecChangedIgnoresStatusWrites(t *testing.T) {
	old := &gpuv1.ClusterPolicy{ObjectMeta: metav1.ObjectMeta{Name: "p", Generation: 2, ResourceVersion: "10"}}
	statusWrite := old.DeepCopy()
	statusWrite.ResourceVersion = "11"
	statusWrite.Status.State = gpuv1.PolicyReady
	specWrite := old.DeepCopy()
	specWrite.Generation = 3
	deleting := old.DeepCopy()
	now := metav1.Now()
	deleting.DeletionTimestamp = &now

	p := SpecChanged()
	for name, tc := range map[string]struct {
		cur  *gpuv1.ClusterPolicy
		want bool
	}{
		"status write":     {statusWrite, false},
		"spec change":      {specWrite, true},
		"deletion started": {deleting, true},
		"nothing at all":   {old.DeepCopy(), false},
	} {
		if got := p.Update(event.UpdateEvent{ObjectOld: old, ObjectNew: tc.cur}); got != tc.want {
			t.Errorf("%s: passed = %v, want %v", name, got, tc.want)
		}
	}
	if !p.Create(event.CreateEvent{Object: old}) || !p.Delete(event.DeleteEvent{Object: old}) {
		t.Error("creation or deletion of a policy did not pass")
	}
}
