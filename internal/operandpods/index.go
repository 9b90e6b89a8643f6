package operandpods

import (
	"context"
	"errors"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/rest"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/source"

	"github.com/gpu-operator/gpu-operator/internal/render"
	"github.com/gpu-operator/gpu-operator/internal/restconfig"
	"github.com/gpu-operator/gpu-operator/internal/state"
	"github.com/gpu-operator/gpu-operator/internal/syncsource"
)

// byNode is the index of pods by the node they are bound to.
const byNode = "node"

// byState is the index of pods by the state they serve.
const byState = "state"

// ErrNotSynced is returned by reads before the first list of pods is in:
// an empty answer then would read as "no pods", which resets states.
var ErrNotSynced = errors.New("operand pods not listed yet")

// Index holds a summary of every operand pod, by node. It is a manager
// Runnable that runs on every replica, leader or not, as the cache does.
type Index struct {
	informer toolscache.SharedIndexInformer
}

// New returns an index fed by lw, which lists and watches operand pods.
func New(lw toolscache.ListerWatcher) *Index {
	informer := toolscache.NewSharedIndexInformerWithOptions(lw, &corev1.Pod{}, toolscache.SharedIndexInformerOptions{
		Indexers: toolscache.Indexers{byNode: nodeOf, byState: stateOf},
	})
	// SetTransform fails only on a started informer.
	_ = informer.SetTransform(summarize)
	return &Index{informer: informer}
}

// ForNamespace returns an index of the operator's pods in namespace, as
// the label managed-by selects them.
func ForNamespace(cfg *rest.Config, namespace string) (*Index, error) {
	c, err := corev1client.NewForConfig(restconfig.Protobuf(cfg))
	if err != nil {
		return nil, fmt.Errorf("building the operand pods client: %w", err)
	}
	selector := render.LabelManagedBy + "=" + render.ManagedBy
	lw := toolscache.NewFilteredListWatchFromClient(c.RESTClient(), "pods", namespace,
		func(o *metav1.ListOptions) { o.LabelSelector = selector })
	return New(lw), nil
}

// summarize is the informer's transform: only summaries are stored, and
// the decoded Pod is garbage at once. A transform may see an object twice.
func summarize(obj any) (any, error) {
	if p, ok := obj.(*corev1.Pod); ok {
		return Summarize(p), nil
	}
	return obj, nil
}

func nodeOf(obj any) ([]string, error) {
	p, ok := obj.(*Pod)
	if !ok || p.Node == "" {
		return nil, nil
	}
	return []string{p.Node}, nil
}

func stateOf(obj any) ([]string, error) {
	p, ok := obj.(*Pod)
	if !ok || p.State == "" {
		return nil, nil
	}
	return []string{string(p.State)}, nil
}

// Start runs the informer until ctx ends.
func (i *Index) Start(ctx context.Context) error {
	i.informer.RunWithContext(ctx)
	return nil
}

// NeedLeaderElection says the index runs on followers too, ready to act
// the moment they lead.
func (i *Index) NeedLeaderElection() bool { return false }

// OnNode returns the summaries of the pods bound to node.
func (i *Index) OnNode(node string) ([]*Pod, error) {
	if !i.informer.HasSynced() {
		return nil, ErrNotSynced
	}
	objs, err := i.informer.GetIndexer().ByIndex(byNode, node)
	if err != nil {
		return nil, fmt.Errorf("reading operand pods on node %s: %w", node, err)
	}
	return pods(objs), nil
}

// OfState returns the summaries of the pods of one state (their
// LabelState); none on a nil index.
func (i *Index) OfState(name state.Name) ([]*Pod, error) {
	if i == nil {
		return nil, nil
	}
	if !i.informer.HasSynced() {
		return nil, ErrNotSynced
	}
	objs, err := i.informer.GetIndexer().ByIndex(byState, string(name))
	if err != nil {
		return nil, fmt.Errorf("reading the pods of %s: %w", name, err)
	}
	return pods(objs), nil
}

// All returns the summaries of every operand pod.
func (i *Index) All() ([]*Pod, error) {
	if !i.informer.HasSynced() {
		return nil, ErrNotSynced
	}
	return pods(i.informer.GetIndexer().List()), nil
}

func pods(objs []any) []*Pod {
	out := make([]*Pod, 0, len(objs))
	for _, o := range objs {
		if p, ok := o.(*Pod); ok {
			out = append(out, p)
		}
	}
	return out
}

// Source is a controller's watch of operand pods: h receives *Pod, and the
// controller starts its workers only once the pods are listed.
func (i *Index) Source(h handler.EventHandler, predicates ...predicate.Predicate) source.SyncingSource {
	return syncsource.New(i.informer, "operand pods", h, predicates...)
}
