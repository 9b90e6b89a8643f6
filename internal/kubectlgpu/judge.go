package kubectlgpu

import (
	"context"
	"fmt"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/gpu-operator/gpu-operator/internal/controller/maintenance"
	"github.com/gpu-operator/gpu-operator/internal/controller/node"
	"github.com/gpu-operator/gpu-operator/internal/draslices"
	"github.com/gpu-operator/gpu-operator/internal/explain"
	"github.com/gpu-operator/gpu-operator/internal/operandpods"
	"github.com/gpu-operator/gpu-operator/internal/policy"
	"github.com/gpu-operator/gpu-operator/internal/render"
	"github.com/gpu-operator/gpu-operator/internal/scheme"
	"github.com/gpu-operator/gpu-operator/internal/state"
	"github.com/gpu-operator/gpu-operator/internal/state/registry"
	"github.com/gpu-operator/gpu-operator/internal/timers"
)

// syncTimeout bounds the wait for the operand pods and slices lists.
const syncTimeout = time.Minute

// judge is the node controller's judgement, on live reads: the same
// Decide the operator makes, writing nothing. It uses the operator's
// default timers: where the install sets others (operator.timers), a
// reason that names a grace period may differ from the operator's.
type judge struct {
	r *node.Reconciler
	// m is the maintenance controller, for its plan only.
	m *maintenance.Reconciler
	c client.Client
}

func newJudge(ctx context.Context, cfg *rest.Config, namespace string) (*judge, error) {
	c, err := client.New(cfg, client.Options{Scheme: scheme.New()})
	if err != nil {
		return nil, err
	}
	graph, err := registry.Graph()
	if err != nil {
		return nil, err
	}
	// One list first: a refusal (RBAC) or a namespace without the
	// operator says so at once, where the informers below would retry
	// for a minute and then judge on nothing.
	sets := &appsv1.DaemonSetList{}
	if err := c.List(ctx, sets, client.InNamespace(namespace), client.MatchingLabels{render.LabelManagedBy: render.ManagedBy},
		client.Limit(1)); err != nil {
		return nil, fmt.Errorf("reading the operator's DaemonSets in %s: %w", namespace, err)
	}
	if len(sets.Items) == 0 {
		return nil, fmt.Errorf("no operand DaemonSet of the operator in namespace %s: give the operator's namespace with -n", namespace)
	}
	if err := c.List(ctx, &corev1.PodList{}, client.InNamespace(namespace), client.Limit(1)); err != nil {
		return nil, fmt.Errorf("reading the operand pods in %s: %w", namespace, err)
	}
	pods, err := operandpods.ForNamespace(cfg, namespace)
	if err != nil {
		return nil, err
	}
	go func() { _ = pods.Start(ctx) }()
	var slices *draslices.Index
	if served, err := slicesServed(cfg); err != nil {
		return nil, err
	} else if served {
		if slices, err = draslices.ForConfig(cfg); err != nil {
			return nil, err
		}
		go func() { _ = slices.Start(ctx) }()
	}
	if err := waitSynced(ctx, func() error {
		if _, err := pods.All(); err != nil {
			return err
		}
		if slices != nil {
			_, err := slices.OnNode("")
			return err
		}
		return nil
	}); err != nil {
		return nil, fmt.Errorf("listing the operand pods in %s and the ResourceSlices: %w", namespace, err)
	}
	j := &judge{c: c, r: &node.Reconciler{Client: c, Pods: pods, Slices: slices, Graph: graph, Namespace: namespace,
		Timers: timers.Defaults()},
		m: &maintenance.Reconciler{Client: c, APIReader: c, Pods: pods, Graph: graph, Namespace: namespace,
			Timers: timers.Defaults(), Now: time.Now}}
	if slices != nil {
		// A nil *draslices.Index in the interface would not read as none.
		j.m.Slices = slices
	}
	return j, nil
}

// explain explains one node.
func (j *judge) explain(ctx context.Context, name string) (explain.Node, error) {
	n := &corev1.Node{}
	if err := j.c.Get(ctx, client.ObjectKey{Name: name}, n); err != nil {
		if apierrors.IsNotFound(err) {
			return explain.Node{}, fmt.Errorf("no node %s", name)
		}
		return explain.Node{}, err
	}
	why, err := j.r.Explain(ctx, n)
	if err != nil {
		return explain.Node{}, fmt.Errorf("judging node %s: %w", name, err)
	}
	onNode, err := j.r.Pods.OnNode(name)
	if err != nil {
		return explain.Node{}, err
	}
	facts := explain.Facts{Why: why, Pods: map[state.Name]string{}, Namespace: j.r.Namespace}
	// Each state's pod as the judgement picks it.
	for s, p := range operandpods.PerState(onNode) {
		facts.Pods[s] = p.Name
	}
	if cp, err := policy.Active(ctx, j.c); err == nil && cp != nil {
		facts.RepairsAutoStart = cp.Spec.Operator.Remediation.AutoStarts()
	}
	return explain.ForNode(n, j.r.Graph, facts), nil
}

// slicesServed reports whether the API server serves resource.k8s.io/v1
// ResourceSlices.
func slicesServed(cfg *rest.Config) (bool, error) {
	d, err := discovery.NewDiscoveryClientForConfig(cfg)
	if err != nil {
		return false, err
	}
	list, err := d.ServerResourcesForGroupVersion("resource.k8s.io/v1")
	if apierrors.IsNotFound(err) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	for _, r := range list.APIResources {
		if r.Name == "resourceslices" {
			return true, nil
		}
	}
	return false, nil
}

func waitSynced(ctx context.Context, synced func() error) error {
	ctx, cancel := context.WithTimeout(ctx, syncTimeout)
	defer cancel()
	for {
		err := synced()
		if err == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return err
		case <-time.After(100 * time.Millisecond):
		}
	}
}
