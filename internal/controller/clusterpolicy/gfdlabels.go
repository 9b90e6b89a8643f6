package clusterpolicy

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	gpuv1 "github.com/gpu-operator/gpu-operator/api/v1"
	"github.com/gpu-operator/gpu-operator/internal/render"
	"github.com/gpu-operator/gpu-operator/internal/state"
	"github.com/gpu-operator/gpu-operator/internal/state/gfd"
	"github.com/gpu-operator/gpu-operator/internal/state/nfd"
)

// GFD publishes its labels through NFD: it writes a file nfd-worker reads
// once a minute, and removes the file when it stops (k8s-device-plugin
// v0.20.0 cmd/gpu-feature-discovery/main.go, removeOutputFile); nfd-master
// then removes the labels. Nothing removes them once NFD is gone, and
// workloads selecting nvidia.com/gpu.product would land on nodes without a
// GPU stack. So the cleanup of a deleted policy keeps NFD until GFD's pods
// are gone and NFD removed their labels, within Timers.GFDLabelsWait of the
// deletion; where NFD is the operator's, it then removes what is left
// itself, as NFD's own prune does, once no nfd-master could put it back.

// gfdLeftovers is what GFD left in the cluster: the labels NFD published
// for it, by node, and its pods.
type gfdLeftovers struct {
	labels map[string][]string
	pods   int
}

func (g gfdLeftovers) none() bool { return len(g.labels) == 0 && g.pods == 0 }

// gfdLabels returns the GFD labels a node carries that NFD says it set. A
// label NFD did not set is someone else's (a person's, another labeller's)
// and stays.
func gfdLabels(n *corev1.Node) []string {
	var out []string
	for _, l := range nfd.PublishedLabels(n.Annotations) {
		if _, ok := n.Labels[l]; ok && gfd.IsLabel(l) {
			out = append(out, l)
		}
	}
	return out
}

// gfdLeftoversNow lists GFD's labels on the nodes and its pods.
func (r *Reconciler) gfdLeftoversNow(ctx context.Context) (gfdLeftovers, error) {
	out := gfdLeftovers{labels: map[string][]string{}}
	nodes := &corev1.NodeList{}
	if err := r.Client.List(ctx, nodes, client.UnsafeDisableDeepCopy); err != nil {
		return out, fmt.Errorf("listing nodes: %w", err)
	}
	for i := range nodes.Items {
		if l := gfdLabels(&nodes.Items[i]); len(l) > 0 {
			out.labels[nodes.Items[i].Name] = l
		}
	}
	var err error
	out.pods, err = r.countPods(ctx, client.MatchingLabels{render.LabelState: string(state.GPUFeatureDiscovery)})
	return out, err
}

func (r *Reconciler) countPods(ctx context.Context, selector client.MatchingLabels) (int, error) {
	pods := &corev1.PodList{}
	if err := r.Client.List(ctx, pods, client.InNamespace(r.Namespace), selector, client.UnsafeDisableDeepCopy); err != nil {
		return 0, fmt.Errorf("listing pods: %w", err)
	}
	return len(pods.Items), nil
}

// gfdWaitOver says whether the cleanup has waited long enough for GFD's
// labels to go the way they came: GFDLabelsWait after the deletion.
func (r *Reconciler) gfdWaitOver(cp *gpuv1.ClusterPolicy) bool {
	return !r.now().Before(cp.DeletionTimestamp.Add(r.GFDLabelsWait))
}

// gfdLabelsLeft deals with the GFD labels NFD left when the wait ended:
// where NFD is the operator's, it removes them (and their names from NFD's
// annotation) once no nfd-master of the operator's could put them back;
// where NFD is the cluster's own, it says on which nodes they stay. It
// says whether it is done; false means wait for nfd-master to go.
func (r *Reconciler) gfdLabelsLeft(ctx context.Context, cp *gpuv1.ClusterPolicy, left gfdLeftovers) (bool, error) {
	nodes := slices.Sorted(maps.Keys(left.labels))
	if !cp.Spec.NFD.IsEnabled() {
		r.Recorder.Eventf(cp, nil, corev1.EventTypeWarning, "GFDLabelsLeft", "Cleanup",
			"GFD's labels are still on %d node(s) (%s): the cluster's NFD removes them once GFD's file is gone from each node's features.d",
			len(nodes), strings.Join(firstFew(nodes), ", "))
		return true, nil
	}
	masters, err := r.countPods(ctx, client.MatchingLabels{render.LabelName: nfd.MasterName})
	if err != nil {
		return false, err
	}
	// Bounded: an nfd-master pod on a node that is gone never terminates,
	// and cannot write either.
	if masters > 0 && r.now().Before(cp.DeletionTimestamp.Add(2*r.GFDLabelsWait)) {
		return false, nil
	}
	for _, name := range nodes {
		if err := r.removeNodeLabels(ctx, name); err != nil {
			return false, err
		}
	}
	ctrl.LoggerFrom(ctx).Info("removed the GFD labels NFD had not removed", "nodes", len(left.labels))
	return true, nil
}

// removeNodeLabels removes a node's GFD labels as NFD published them, read
// live, in one patch conditional on the node as read.
func (r *Reconciler) removeNodeLabels(ctx context.Context, name string) error {
	n := &corev1.Node{}
	if err := r.Client.Get(ctx, client.ObjectKey{Name: name}, n); err != nil {
		return client.IgnoreNotFound(err)
	}
	labels := gfdLabels(n)
	if len(labels) == 0 {
		return nil
	}
	base := n.DeepCopy()
	for _, l := range labels {
		delete(n.Labels, l)
	}
	kept := slices.DeleteFunc(nfd.PublishedLabels(n.Annotations), func(l string) bool { return slices.Contains(labels, l) })
	if len(kept) == 0 {
		delete(n.Annotations, nfd.FeatureLabelsAnnotation)
	} else {
		n.Annotations[nfd.FeatureLabelsAnnotation] = nfd.Annotate(kept)
	}
	if err := r.Client.Patch(ctx, n, client.MergeFromWithOptions(base, client.MergeFromWithOptimisticLock{})); err != nil {
		return fmt.Errorf("removing GFD's labels %s from node %s: %w", strings.Join(labels, ", "), name, client.IgnoreNotFound(err))
	}
	return nil
}

func (r *Reconciler) now() time.Time {
	if r.Now != nil {
		return r.Now()
	}
	return time.Now()
}

// firstFew returns at most five names, and how many more there are.
func firstFew(names []string) []string {
	if len(names) <= 5 {
		return names
	}
	return append(slices.Clone(names[:5]), fmt.Sprintf("and %d more", len(names)-5))
}
