package controllertest

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"sigs.k8s.io/controller-runtime/pkg/client"

	gpuv1 "github.com/gpu-operator/gpu-operator/api/v1"
	"github.com/gpu-operator/gpu-operator/internal/render"
)

// DriverDeletions records, from a watch on driver pods, every driver pod
// deletion and the upgrade state its node was in when it was seen: the
// rule is that a running driver is only ever replaced at the upgrade's
// pod-restart-required step.
type DriverDeletions struct {
	s        *Suite
	mu       sync.Mutex
	seen     map[string]bool
	breaches []string
	count    int
}

// RecordDriverDeletions starts recording until the test ends.
func (f *Fixture) RecordDriverDeletions() *DriverDeletions {
	ctx, cancel := context.WithCancel(f.Ctx)
	d := &DriverDeletions{s: f.s, seen: map[string]bool{}}
	w, err := f.s.WatchClient.Watch(ctx, &corev1.PodList{}, client.InNamespace(Namespace),
		client.MatchingLabels{render.LabelState: "driver"})
	if err != nil {
		f.T.Fatal(err)
	}
	go func() {
		defer w.Stop()
		for ev := range w.ResultChan() {
			p, ok := ev.Object.(*corev1.Pod)
			if !ok || p.Spec.NodeName == "" || (ev.Type != watch.Deleted && p.DeletionTimestamp == nil) {
				continue
			}
			d.observe(ctx, p)
		}
	}()
	f.T.Cleanup(cancel)
	return d
}

func (d *DriverDeletions) observe(ctx context.Context, p *corev1.Pod) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.seen[string(p.UID)] {
		return
	}
	d.seen[string(p.UID)] = true
	d.count++
	n := &corev1.Node{}
	if err := d.s.Client.Get(ctx, client.ObjectKey{Name: p.Spec.NodeName}, n); err != nil {
		d.breaches = append(d.breaches, fmt.Sprintf("pod %s deleted, node %s unreadable: %v", p.Name, p.Spec.NodeName, err))
		return
	}
	if st := gpuv1.UpgradeState(n.Labels[gpuv1.LabelUpgradeState]); st != gpuv1.UpgradePodRestart {
		d.breaches = append(d.breaches, fmt.Sprintf("driver pod %s on node %s deleted in upgrade state %q", p.Name, n.Name, st))
	}
}

// Results returns how many driver pods were deleted, and the deletions
// that broke the rule.
func (d *DriverDeletions) Results() (int, []string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.count, append([]string(nil), d.breaches...)
}

// DriverOwners returns, per node, the DaemonSet that owns its driver pod
// ("none" for a pod no controller owns).
func (f *Fixture) DriverOwners() map[string]string {
	pods := &corev1.PodList{}
	if err := f.s.Client.List(f.Ctx, pods, client.InNamespace(Namespace), client.MatchingLabels{render.LabelState: "driver"}); err != nil {
		f.T.Fatal(err)
	}
	out := map[string]string{}
	for _, p := range pods.Items {
		if p.DeletionTimestamp != nil {
			continue
		}
		owner := "none"
		if ref := metav1.GetControllerOf(&p); ref != nil {
			owner = ref.Name
		}
		out[p.Spec.NodeName] = owner
	}
	return out
}

// TaintsOf returns a node's taints as key:effect, sorted, but for the node
// lifecycle controller's (node.kubernetes.io/not-ready and the like, which
// come and go with the node's Ready condition).
func (f *Fixture) TaintsOf(node string) func() []string {
	return func() []string {
		var out []string
		for _, t := range f.Node(node).Spec.Taints {
			if !strings.HasPrefix(t.Key, "node.kubernetes.io/") {
				out = append(out, t.Key+":"+string(t.Effect))
			}
		}
		slices.Sort(out)
		return out
	}
}

// WithReadinessTaint turns the policy's readiness taint on.
func WithReadinessTaint(cp *gpuv1.ClusterPolicy) { cp.Spec.Operator.ReadinessTaint.Enabled = true }
