package imagecheck

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	gpuv1 "github.com/gpu-operator/gpu-operator/api/v1"
	gpuv1alpha1 "github.com/gpu-operator/gpu-operator/api/v1alpha1"
	"github.com/gpu-operator/gpu-operator/internal/coalesce"
	"github.com/gpu-operator/gpu-operator/internal/driverpool"
	"github.com/gpu-operator/gpu-operator/internal/gating"
	"github.com/gpu-operator/gpu-operator/internal/operandpods"
	"github.com/gpu-operator/gpu-operator/internal/policy"
)

// +kubebuilder:rbac:groups="",namespace=gpu-operator,resources=pods,verbs=get;list;watch;create;delete

// images is the one key of this controller: each reconcile looks at every
// GPU node's kernel.
var images = reconcile.Request{NamespacedName: types.NamespacedName{Name: "precompiled-images"}}

// batchDelay batches node label changes: a rollout writes thousands.
const batchDelay = time.Second

// retryAfter is how soon a check pod still being deleted is created again.
const retryAfter = 2 * time.Second

// Reconciler keeps the image check pods.
type Reconciler struct {
	Client    client.Client
	Pods      *operandpods.Index
	Namespace string
}

// wanted is an image some GPU nodes boot the kernel of: the nodes its check
// may run on, and the pull secrets of their pool.
type wanted struct {
	nodes       []*corev1.Node
	pullSecrets []string
}

// Reconcile creates a check pod for each image wanted and without one,
// deletes those of images no node wants, and starts again a check the
// kubelet refused or whose node no longer boots its kernel before it
// pulled.
func (r *Reconciler) Reconcile(ctx context.Context, _ ctrl.Request) (ctrl.Result, error) {
	active, err := policy.Active(ctx, r.Client)
	if err != nil {
		return ctrl.Result{}, err
	}
	want := map[string]*wanted{}
	if active != nil && active.Spec.Driver.IsEnabled() {
		if want, err = r.wantedImages(ctx, active); err != nil {
			return ctrl.Result{}, err
		}
	}
	pods, err := r.Pods.OfState(driverpool.CheckState)
	if err != nil {
		return ctrl.Result{}, err
	}
	have := map[string]bool{}
	for _, p := range pods {
		image := p.Annotation(driverpool.AnnotationImage)
		have[image] = true
		if p.DeletionTimestamp != nil {
			continue
		}
		w := want[image]
		verdict, retry := driverpool.Verdict(p)
		onWantedNode := w != nil && slices.ContainsFunc(w.nodes, func(n *corev1.Node) bool { return n.Name == p.Node })
		if w != nil && !retry && (verdict.State == driverpool.ImageAvailable || onWantedNode) {
			continue
		}
		if err := r.Client.Delete(ctx, p.Ref(), client.Preconditions{UID: &p.UID}); client.IgnoreNotFound(err) != nil {
			return ctrl.Result{}, fmt.Errorf("deleting image check pod %s: %w", p.Name, err)
		}
	}
	var result ctrl.Result
	for _, image := range slices.Sorted(maps.Keys(want)) {
		if have[image] {
			continue
		}
		w := want[image]
		pod := driverpool.CheckPod(active, r.Namespace, image, pick(w.nodes).Name, w.pullSecrets)
		switch err := r.Client.Create(ctx, pod); {
		case apierrors.IsAlreadyExists(err):
			// The one of before is still going.
			result.RequeueAfter = retryAfter
		case err != nil:
			return ctrl.Result{}, fmt.Errorf("creating image check pod %s for %s: %w", pod.Name, image, err)
		}
	}
	return result, nil
}

// wantedImages returns the precompiled images the policy's GPU nodes boot
// the kernels of, each with its nodes.
func (r *Reconciler) wantedImages(ctx context.Context, cp *gpuv1.ClusterPolicy) (map[string]*wanted, error) {
	pools, err := driverpool.Load(ctx, r.Client, cp, r.Pods)
	if err != nil {
		return nil, err
	}
	nodes := &corev1.NodeList{}
	if err := r.Client.List(ctx, nodes, client.UnsafeDisableDeepCopy); err != nil {
		return nil, fmt.Errorf("listing nodes: %w", err)
	}
	out := map[string]*wanted{}
	for i := range nodes.Items {
		n := &nodes.Items[i]
		if !gating.IsGPUNode(n) {
			continue
		}
		a := pools.Assign(n.Name, n.Labels)
		if a.Image == "" {
			continue
		}
		w := out[a.Image]
		if w == nil {
			w = &wanted{}
			for _, s := range pools.Pool(a.Pool).Driver.ImagePullSecrets {
				w.pullSecrets = append(w.pullSecrets, string(s))
			}
			out[a.Image] = w
		}
		w.nodes = append(w.nodes, n)
	}
	return out, nil
}

// pick chooses the node a check runs on: a Ready one if any, the first by
// name, so that every look picks the same.
func pick(nodes []*corev1.Node) *corev1.Node {
	slices.SortFunc(nodes, func(a, b *corev1.Node) int {
		if ra, rb := ready(a), ready(b); ra != rb {
			if ra {
				return -1
			}
			return 1
		}
		return strings.Compare(a.Name, b.Name)
	})
	return nodes[0]
}

func ready(n *corev1.Node) bool {
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// SetupWithManager registers the controller: GPU node labels (kernels,
// pools), NVIDIADrivers and policies, and the check pods' verdicts.
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager) error {
	toImages := func(context.Context, client.Object) []reconcile.Request { return []reconcile.Request{images} }
	return ctrl.NewControllerManagedBy(mgr).
		Named("imagecheck").
		WatchesRawSource(r.Pods.Source(handler.EnqueueRequestsFromMapFunc(toImages), driverpool.VerdictChanged())).
		Watches(&corev1.Node{}, coalesce.After(batchDelay, toImages), builder.WithPredicates(predicate.LabelChangedPredicate{})).
		Watches(&gpuv1alpha1.NVIDIADriver{}, handler.EnqueueRequestsFromMapFunc(toImages),
			builder.WithPredicates(policy.SpecChanged())).
		Watches(&gpuv1.ClusterPolicy{}, handler.EnqueueRequestsFromMapFunc(toImages)).
		Complete(r)
}
