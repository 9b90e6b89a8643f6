package imagecheck

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
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

// refusedFor is how long a node that refused a check pod (the kubelet's
// admission, or its pod garbage collected) is passed over for that image;
// with no other node to run it, the check waits that long.
const refusedFor = 5 * time.Minute

// Reconciler keeps the image check pods.
type Reconciler struct {
	Client    client.Client
	Pods      *operandpods.Index
	Namespace string
	// Now is the clock of the refusals; time.Now when nil.
	Now func() time.Time

	mu sync.Mutex
	// refused holds, by image, the nodes that ended a check without a
	// pull, and when.
	refused map[string]map[string]time.Time
}

// wanted is an image some GPU nodes need checked: the nodes its check may
// run on, and the pull secrets of their pools.
type wanted struct {
	nodes       []*corev1.Node
	pullSecrets []string
}

// Reconcile creates a check pod for each image wanted and without one,
// deletes those of images no node wants, and starts again a check that
// ended without a pull, or that waits on a node gone not ready while
// another could run it.
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
		if p.DeletionTimestamp != nil || !r.stale(p, want[image]) {
			continue
		}
		// At once: the pod pulls and exits, and a kubelet that is gone
		// would never confirm a graceful delete, leaving the next check
		// waiting on the name.
		if err := r.Client.Delete(ctx, p.Ref(), client.Preconditions{UID: &p.UID}, client.GracePeriodSeconds(0)); client.IgnoreNotFound(err) != nil {
			return ctrl.Result{}, fmt.Errorf("deleting image check pod %s: %w", p.Name, err)
		}
	}
	r.forgetRefusals(want)
	var result ctrl.Result
	wait := func(d time.Duration) {
		if result.RequeueAfter == 0 || d < result.RequeueAfter {
			result.RequeueAfter = d
		}
	}
	for _, image := range slices.Sorted(maps.Keys(want)) {
		if have[image] {
			continue
		}
		w := want[image]
		node, retryIn := r.pick(image, w.nodes)
		if node == nil {
			wait(retryIn)
			continue
		}
		pod := driverpool.CheckPod(active, r.Namespace, image, node.Name, w.pullSecrets)
		switch err := r.Client.Create(ctx, pod); {
		case apierrors.IsAlreadyExists(err):
			// The one of before is still going.
			wait(retryAfter)
		case err != nil:
			return ctrl.Result{}, fmt.Errorf("creating image check pod %s for %s: %w", pod.Name, image, err)
		}
	}
	return result, nil
}

// stale reports whether a check pod must go: no node wants its image, it
// ended without a pull (the node is then passed over for a while), or it
// waits on a node that is no longer a candidate, or not ready while a
// ready one is. A verdict reached stays, wherever it was reached.
func (r *Reconciler) stale(p *operandpods.Pod, w *wanted) bool {
	if w == nil {
		return true
	}
	image := p.Annotation(driverpool.AnnotationImage)
	verdict, retry := driverpool.Verdict(p)
	if retry {
		r.refuse(image, p.Node)
		return true
	}
	if verdict.State != driverpool.ImageChecking {
		return false
	}
	i := slices.IndexFunc(w.nodes, func(n *corev1.Node) bool { return n.Name == p.Node })
	if i < 0 {
		return true
	}
	// Another node only if it would be picked instead: ready, and not
	// one that refused the image lately.
	return !ready(w.nodes[i]) && slices.ContainsFunc(w.nodes, func(n *corev1.Node) bool {
		return ready(n) && !r.refusedLately(image, n.Name)
	})
}

// forgetRefusals drops the refusals of images no node wants any more.
func (r *Reconciler) forgetRefusals(want map[string]*wanted) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for image := range r.refused {
		if want[image] == nil {
			delete(r.refused, image)
		}
	}
}

func (r *Reconciler) refusedLately(image, node string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	at, ok := r.refused[image][node]
	return ok && r.now().Sub(at) < refusedFor
}

func (r *Reconciler) refuse(image, node string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.refused == nil {
		r.refused = map[string]map[string]time.Time{}
	}
	if r.refused[image] == nil {
		r.refused[image] = map[string]time.Time{}
	}
	r.refused[image][node] = r.now()
}

// pick chooses the node a check runs on: a ready one if any, the first by
// name, so that every look picks the same, passing over the nodes that
// refused the image lately. With none left it says when to look again.
func (r *Reconciler) pick(image string, nodes []*corev1.Node) (*corev1.Node, time.Duration) {
	r.mu.Lock()
	defer r.mu.Unlock()
	now := r.now()
	var soonest time.Duration
	candidates := make([]*corev1.Node, 0, len(nodes))
	for _, n := range nodes {
		at, ok := r.refused[image][n.Name]
		if left := refusedFor - now.Sub(at); ok && left > 0 {
			if soonest == 0 || left < soonest {
				soonest = left
			}
			continue
		}
		delete(r.refused[image], n.Name)
		candidates = append(candidates, n)
	}
	if len(candidates) == 0 {
		return nil, soonest
	}
	slices.SortFunc(candidates, func(a, b *corev1.Node) int {
		if ra, rb := ready(a), ready(b); ra != rb {
			if ra {
				return -1
			}
			return 1
		}
		return strings.Compare(a.Name, b.Name)
	})
	return candidates[0], 0
}

func (r *Reconciler) now() time.Time {
	if r.Now != nil {
		return r.Now()
	}
	return time.Now()
}

// wantedImages returns the precompiled images to check, each with the
// nodes its check may run on: the image for the kernel each node of a
// precompiled pool boots, and the one its driver runs (its DaemonSet is
// rendered only while that image is not known missing). Nodes on their
// host's driver, or opted out of the driver, need none.
func (r *Reconciler) wantedImages(ctx context.Context, cp *gpuv1.ClusterPolicy) (map[string]*wanted, error) {
	pools, err := driverpool.Load(ctx, r.Client, cp, r.Pods)
	if err != nil {
		return nil, err
	}
	if !pools.AnyPrecompiled() {
		// The common case: no image to check, so no reason to copy the
		// fleet's nodes out of the cache at every label change.
		return map[string]*wanted{}, nil
	}
	nodes := &corev1.NodeList{}
	if err := r.Client.List(ctx, nodes, client.UnsafeDisableDeepCopy); err != nil {
		return nil, fmt.Errorf("listing nodes: %w", err)
	}
	out := map[string]*wanted{}
	tolerations := driverpool.CheckTolerations(cp)
	add := func(image string, n *corev1.Node, secrets []gpuv1.ObjectName) {
		w := out[image]
		if w == nil {
			w = &wanted{}
			out[image] = w
		}
		if !slices.Contains(w.nodes, n) {
			w.nodes = append(w.nodes, n)
		}
		for _, s := range secrets {
			if !slices.Contains(w.pullSecrets, string(s)) {
				w.pullSecrets = append(w.pullSecrets, string(s))
			}
		}
	}
	for i := range nodes.Items {
		n := &nodes.Items[i]
		if !gating.IsGPUNode(n) || !driverpool.RunsContainerDriver(n.Labels) || !driverpool.CheckMayRunOn(n, tolerations) {
			continue
		}
		a := pools.Assign(n.Name, n.Labels)
		p := pools.Pool(a.Pool)
		if p == nil || !p.Precompiled {
			continue
		}
		if a.Image != "" {
			add(a.Image, n, p.Driver.ImagePullSecrets)
		}
		if image, ok := pools.RunningImage(n.Labels); ok && n.Labels[gpuv1.LabelDriverPool] == a.Pool {
			add(image, n, p.Driver.ImagePullSecrets)
		}
	}
	return out, nil
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
// pools), readiness and NoExecute taints, NVIDIADrivers and policies, and the check pods'
// verdicts.
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager) error {
	toImages := func(context.Context, client.Object) []reconcile.Request { return []reconcile.Request{images} }
	return ctrl.NewControllerManagedBy(mgr).
		Named("imagecheck").
		WatchesRawSource(r.Pods.Source(handler.EnqueueRequestsFromMapFunc(toImages), driverpool.VerdictChanged())).
		Watches(&corev1.Node{}, coalesce.After(batchDelay, toImages),
			builder.WithPredicates(predicate.Or(predicate.LabelChangedPredicate{}, placementChanged()))).
		Watches(&gpuv1alpha1.NVIDIADriver{}, handler.EnqueueRequestsFromMapFunc(toImages),
			builder.WithPredicates(policy.SpecChanged())).
		Watches(&gpuv1.ClusterPolicy{}, handler.EnqueueRequestsFromMapFunc(toImages)).
		Complete(r)
}

// placementChanged passes node updates whose Ready condition or NoExecute
// taints changed: a check waiting on a node gone not ready moves to a
// ready one, and one on a node quarantined since moves off it.
func placementChanged() predicate.Predicate {
	return predicate.Funcs{
		CreateFunc: func(event.CreateEvent) bool { return false },
		DeleteFunc: func(event.DeleteEvent) bool { return true },
		UpdateFunc: func(e event.UpdateEvent) bool {
			old, cur := e.ObjectOld.(*corev1.Node), e.ObjectNew.(*corev1.Node)
			return ready(old) != ready(cur) || !slices.Equal(noExecuteTaints(old), noExecuteTaints(cur))
		},
		GenericFunc: func(event.GenericEvent) bool { return false },
	}
}

func noExecuteTaints(n *corev1.Node) []corev1.Taint {
	var out []corev1.Taint
	for _, t := range n.Spec.Taints {
		if t.Effect == corev1.TaintEffectNoExecute {
			t.TimeAdded = nil // set by the node lifecycle controller; no change of placement
			out = append(out, t)
		}
	}
	return out
}
