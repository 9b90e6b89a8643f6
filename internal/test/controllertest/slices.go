package controllertest

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

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
	var want []*resourcev1.ResourceSlice
	for i := range nodes {
		want = append(want, fakenode.DRASlices(&nodes[i], plugins[nodes[i].Name])...)
	}
	current := make([]*resourcev1.ResourceSlice, len(have.Items))
	for i := range have.Items {
		current[i] = &have.Items[i]
	}
	create, update, remove := fakenode.SliceChanges(current, want)
	for _, rs := range remove {
		if err := s.c.Delete(ctx, rs, client.Preconditions{UID: &rs.UID}); err != nil && !apierrors.IsNotFound(err) {
			return err
		}
	}
	for _, rs := range update {
		if err := s.c.Update(ctx, rs); err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
			return err
		}
	}
	for _, rs := range create {
		if err := s.c.Create(ctx, rs); err != nil && !apierrors.IsAlreadyExists(err) {
			return err
		}
	}
	return nil
}
