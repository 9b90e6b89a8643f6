package draslices

import (
	"context"
	"errors"
	"fmt"

	resourcev1 "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/fields"
	resourceclient "k8s.io/client-go/kubernetes/typed/resource/v1"
	"k8s.io/client-go/rest"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/source"

	"github.com/gpu-operator/gpu-operator/internal/restconfig"
	"github.com/gpu-operator/gpu-operator/internal/syncsource"
)

// byNode indexes the NVIDIA driver's slices by their node.
const byNode = "node"

// ErrNotSynced is returned by reads before the first list is in: an
// empty answer then would read as "no slices", which fails a proof and
// clears a switch's wait.
var ErrNotSynced = errors.New("resource slices not listed yet")

// Index holds a summary of every ResourceSlice, by node. It is a manager
// Runnable that runs on every replica, leader or not, as the cache does.
type Index struct {
	informer toolscache.SharedIndexInformer
}

// New returns an index fed by lw, which lists and watches ResourceSlices.
func New(lw toolscache.ListerWatcher) *Index {
	informer := toolscache.NewSharedIndexInformerWithOptions(lw, &resourcev1.ResourceSlice{}, toolscache.SharedIndexInformerOptions{
		Indexers: toolscache.Indexers{byNode: nodeOf},
	})
	// SetTransform fails only on a started informer.
	_ = informer.SetTransform(summarize)
	return &Index{informer: informer}
}

// ForConfig returns an index of the cluster's ResourceSlices in
// resource.k8s.io/v1 (Kubernetes 1.34 and later). Every driver's slices
// are listed, as a field selector names one driver and the NVIDIA driver
// has two; other drivers' are kept as a name and a node.
func ForConfig(cfg *rest.Config) (*Index, error) {
	c, err := resourceclient.NewForConfig(restconfig.Protobuf(cfg))
	if err != nil {
		return nil, fmt.Errorf("building the resource slices client: %w", err)
	}
	return New(toolscache.NewListWatchFromClient(c.RESTClient(), "resourceslices", "", fields.Everything())), nil
}

// summarize is the informer's transform: only summaries are stored. A
// transform may see an object twice.
func summarize(obj any) (any, error) {
	if rs, ok := obj.(*resourcev1.ResourceSlice); ok {
		return Keep(rs), nil
	}
	return obj, nil
}

func nodeOf(obj any) ([]string, error) {
	s, ok := obj.(*Slice)
	if !ok || s.Node == "" || !s.Ours() {
		return nil, nil
	}
	return []string{s.Node}, nil
}

// Start runs the informer until ctx ends.
func (i *Index) Start(ctx context.Context) error {
	i.informer.RunWithContext(ctx)
	return nil
}

// NeedLeaderElection says the index runs on followers too, ready to act
// the moment they lead.
func (i *Index) NeedLeaderElection() bool { return false }

// OnNode summarises the NVIDIA driver's slices of node.
func (i *Index) OnNode(node string) (*Node, error) {
	if !i.informer.HasSynced() {
		return nil, ErrNotSynced
	}
	objs, err := i.informer.GetIndexer().ByIndex(byNode, node)
	if err != nil {
		return nil, fmt.Errorf("reading the resource slices of node %s: %w", node, err)
	}
	list := make([]*Slice, 0, len(objs))
	for _, o := range objs {
		if s, ok := o.(*Slice); ok {
			list = append(list, s)
		}
	}
	return Summarize(list), nil
}

// Source is a controller's watch of ResourceSlices: h receives *Slice,
// and the controller starts its workers only once the slices are listed.
func (i *Index) Source(h handler.EventHandler, predicates ...predicate.Predicate) source.SyncingSource {
	return syncsource.New(i.informer, "resource slices", h, predicates...)
}
