package controllertest

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/gpu-operator/gpu-operator/internal/draslices"
	"github.com/gpu-operator/gpu-operator/internal/render"
	"github.com/gpu-operator/gpu-operator/internal/state"
	"github.com/gpu-operator/gpu-operator/internal/test/fakenode"
)

// slices does what a node's DRA kubelet plugin and its kubelet would:
// the node's ResourceSlices are published while the plugin's pod is ready
// there (fakenode.DRASlices), and removed once it is not, as the kubelet
// wipes a stopped plugin's slices (without its delay here).
func (s *Cluster) slices(ctx context.Context, nodes []corev1.Node, pods []corev1.Pod) error {
	plugins := map[string]*corev1.Pod{}
	for i := range pods {
		p := &pods[i]
		if p.Namespace == s.namespace && p.Labels[render.LabelState] == string(state.DRADriver) && p.DeletionTimestamp == nil {
			plugins[p.Spec.NodeName] = p
		}
	}
	have := &resourcev1.ResourceSliceList{}
	if err := s.c.List(ctx, have); err != nil {
		return err
	}
	want := map[string]*resourcev1.ResourceSlice{}
	for i := range nodes {
		for _, rs := range fakenode.DRASlices(&nodes[i], plugins[nodes[i].Name]) {
			want[rs.Name] = rs
		}
	}
	for i := range have.Items {
		cur := &have.Items[i]
		if cur.Spec.Driver != draslices.GPUDriver && cur.Spec.Driver != draslices.ComputeDomainDriver {
			continue
		}
		next, keep := want[cur.Name]
		delete(want, cur.Name)
		var err error
		switch {
		case !keep:
			err = s.c.Delete(ctx, cur, client.Preconditions{UID: &cur.UID})
		case !apiequality.Semantic.DeepEqual(cur.Spec, next.Spec):
			next.ResourceVersion = cur.ResourceVersion
			err = s.c.Update(ctx, next)
		}
		if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
			return err
		}
	}
	for _, rs := range want {
		if err := s.c.Create(ctx, rs); err != nil && !apierrors.IsAlreadyExists(err) {
			return err
		}
	}
	return nil
}
