package main

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/gpu-operator/gpu-operator/internal/render"
	"github.com/gpu-operator/gpu-operator/internal/state"
	"github.com/gpu-operator/gpu-operator/internal/test/fakenode"
)

// slicesByNode indexes the ResourceSlices the agent publishes.
func slicesByNode(o any) ([]string, error) {
	rs, ok := o.(*resourcev1.ResourceSlice)
	if !ok || rs.Spec.NodeName == nil {
		return nil, nil
	}
	return []string{*rs.Spec.NodeName}, nil
}

// syncSlices publishes the ResourceSlices the node's DRA kubelet plugin
// would while its pod runs there, and removes them once it does not, as
// the kubelet wipes a stopped plugin's slices (without its delay here).
// The scheduler allocates claims from them for real.
func (a *agent) syncSlices(ctx context.Context, node *corev1.Node, pods []*corev1.Pod) error {
	if a.slices == nil {
		return nil // resource.k8s.io/v1 is not served
	}
	var plugin *corev1.Pod
	for _, p := range pods {
		if p.Labels[render.LabelState] == string(state.DRADriver) && p.DeletionTimestamp == nil {
			plugin = p
		}
	}
	objs, err := a.slices.ByIndex(byNode, node.Name)
	if err != nil {
		return err
	}
	have := make([]*resourcev1.ResourceSlice, 0, len(objs))
	for _, o := range objs {
		have = append(have, o.(*resourcev1.ResourceSlice))
	}
	create, update, remove := fakenode.SliceChanges(have, fakenode.DRASlices(node, plugin))
	api := a.cs.ResourceV1().ResourceSlices()
	for _, rs := range remove {
		err := api.Delete(ctx, rs.Name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &rs.UID}})
		if err != nil && !apierrors.IsNotFound(err) {
			return err
		}
	}
	for _, rs := range update {
		if _, err := api.Update(ctx, rs, metav1.UpdateOptions{}); err != nil && !apierrors.IsNotFound(err) {
			return err
		}
	}
	for _, rs := range create {
		if _, err := api.Create(ctx, rs, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			return err
		}
	}
	return nil
}

// servesResourceSlices reports whether the cluster serves
// resource.k8s.io/v1 ResourceSlices (Kubernetes 1.34 and later).
func servesResourceSlices(d interface {
	ServerResourcesForGroupVersion(string) (*metav1.APIResourceList, error)
}) bool {
	list, err := d.ServerResourcesForGroupVersion(resourcev1.SchemeGroupVersion.String())
	if err != nil {
		return false
	}
	for _, r := range list.APIResources {
		if r.Name == "resourceslices" {
			return true
		}
	}
	return false
}
