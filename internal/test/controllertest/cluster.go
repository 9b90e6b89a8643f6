package controllertest

import (
	"context"
	"slices"
	"strings"
	"sync"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/component-helpers/scheduling/corev1/nodeaffinity"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	"github.com/gpu-operator/gpu-operator/internal/render"
	"github.com/gpu-operator/gpu-operator/internal/state"
	"github.com/gpu-operator/gpu-operator/internal/test/fakenode"
)

// Behaviour is how the simulated kubelet runs an operand pod.
type Behaviour int

const (
	// BecomesReady: the pod turns Ready once created (the default).
	BecomesReady Behaviour = iota
	// StaysNotReady: the pod runs but never turns Ready.
	StaysNotReady
	// CrashLoops: the pod's container crash-loops.
	CrashLoops
)

// Cluster simulates the DaemonSet controller and the kubelets for the
// operand DaemonSets in one namespace.
type Cluster struct {
	c         client.Client
	namespace string

	mu sync.Mutex
	// behaviour of the pods of a state on a node; absent means BecomesReady.
	behaviour map[string]Behaviour
	// published says, by node, whether NFD published for it at the last
	// step; stranded lists the nodes NFD left while GFD's labels it had
	// published were on them, labels nothing would remove on a real node.
	published map[string]bool
	stranded  []string
	// unscanned are the nodes whose nfd-worker does not scan GFD's file
	// again for now (a real one scans it once a minute).
	unscanned map[string]bool
	// adoptionHeld keeps orphaned pods orphaned: the real garbage
	// collector and DaemonSet controller take a while to hand them over.
	adoptionHeld bool
	// missingImages are the images no registry has: a pod of one waits
	// in ErrImagePull, as a kubelet's would.
	missingImages map[string]bool
	// driverStop is how long a driver pod's deletion waits for its
	// kubelet (SetDriverStopTime); zero confirms it at the next step.
	driverStop time.Duration
	// woken holds a wake-up for the next step (wake.go).
	woken chan struct{}
}

func newCluster(c client.Client, namespace string) *Cluster {
	return &Cluster{c: c, namespace: namespace, behaviour: map[string]Behaviour{},
		published: map[string]bool{}, unscanned: map[string]bool{}, missingImages: map[string]bool{},
		woken: make(chan struct{}, 1)}
}

// Set sets the behaviour of a state's pods on a node; state "*" stands for
// every state without a behaviour of its own, and resets those.
func (s *Cluster) Set(node, state string, b Behaviour) {
	s.mu.Lock()
	defer s.mu.Unlock()
	defer s.wake()
	if state == "*" {
		for k := range s.behaviour {
			if strings.HasPrefix(k, node+"/") {
				delete(s.behaviour, k)
			}
		}
	}
	s.behaviour[node+"/"+state] = b
}

func (s *Cluster) get(node, state string) Behaviour {
	s.mu.Lock()
	defer s.mu.Unlock()
	if b, ok := s.behaviour[node+"/"+state]; ok {
		return b
	}
	return s.behaviour[node+"/*"]
}

// step does what the DaemonSet controller and kubelets would: one pod per
// matching node, none where the affinity no longer matches, statuses as
// the behaviour says.
func (s *Cluster) step(ctx context.Context) error {
	dsList := &appsv1.DaemonSetList{}
	if err := s.c.List(ctx, dsList, client.InNamespace(s.namespace)); err != nil {
		return err
	}
	nodes := &corev1.NodeList{}
	if err := s.c.List(ctx, nodes); err != nil {
		return err
	}
	pods := &corev1.PodList{}
	if err := s.c.List(ctx, pods); err != nil {
		return err
	}
	for i := range dsList.Items {
		ds := &dsList.Items[i]
		for j := range nodes.Items {
			if err := s.syncNode(ctx, ds, &nodes.Items[j], pods.Items); err != nil {
				return err
			}
		}
	}
	byName := map[string]*corev1.Node{}
	for i := range nodes.Items {
		byName[nodes.Items[i].Name] = &nodes.Items[i]
	}
	if err := s.collectOrphans(ctx, dsList.Items, pods.Items); err != nil {
		return err
	}
	for i := range pods.Items {
		p := &pods.Items[i]
		switch {
		case p.Namespace == s.namespace && p.Spec.NodeName == "" && p.Labels[render.LabelState] == string(state.CUDAWorkload):
			if err := s.schedule(ctx, p, nodes.Items); err != nil {
				return err
			}
		case p.Namespace == s.namespace:
			if err := s.kubelet(ctx, p, byName[p.Spec.NodeName]); err != nil {
				return err
			}
		case p.DeletionTimestamp != nil && p.Spec.NodeName != "":
			// A workload pod being evicted: its kubelet would stop it.
			if err := client.IgnoreNotFound(s.c.Delete(ctx, p, client.GracePeriodSeconds(0))); err != nil {
				return err
			}
		}
	}
	if err := s.nodes(ctx, nodes.Items, pods.Items); err != nil {
		return err
	}
	return s.slices(ctx, nodes.Items, pods.Items)
}

// collectOrphans does what the garbage collector, which envtest does not
// run, would: the pods of a DaemonSet deleted with the orphan policy lose
// their owner and stay, then the DaemonSet goes; the pods of a DaemonSet
// deleted otherwise are deleted.
func (s *Cluster) collectOrphans(ctx context.Context, sets []appsv1.DaemonSet, pods []corev1.Pod) error {
	live := map[types.UID]bool{}
	for i := range sets {
		ds := &sets[i]
		if ds.DeletionTimestamp == nil || !controllerutil.ContainsFinalizer(ds, metav1.FinalizerOrphanDependents) {
			live[ds.UID] = true
			continue
		}
		for j := range pods {
			if p := &pods[j]; metav1.IsControlledBy(p, ds) {
				base := p.DeepCopy()
				p.OwnerReferences = nil
				if err := client.IgnoreNotFound(s.c.Patch(ctx, p, client.MergeFrom(base))); err != nil {
					return err
				}
			}
		}
		base := ds.DeepCopy()
		controllerutil.RemoveFinalizer(ds, metav1.FinalizerOrphanDependents)
		if err := client.IgnoreNotFound(s.c.Patch(ctx, ds, client.MergeFrom(base))); err != nil {
			return err
		}
	}
	for i := range pods {
		p := &pods[i]
		owner := metav1.GetControllerOf(p)
		if p.Namespace != s.namespace || owner == nil || owner.Kind != "DaemonSet" || live[owner.UID] {
			continue
		}
		if err := client.IgnoreNotFound(s.c.Delete(ctx, p, client.GracePeriodSeconds(0))); err != nil {
			return err
		}
	}
	return nil
}

// nodes makes each node show what its operand pods do there, as a real
// GPU node would (internal/test/fakenode): GPUs while the device plugin
// runs, GFD's labels while GFD runs, the NVIDIA runtime handler once the
// toolkit configured the runtime.
func (s *Cluster) nodes(ctx context.Context, nodes []corev1.Node, pods []corev1.Pod) error {
	on := map[string][]*corev1.Pod{}
	for i := range pods {
		if p := &pods[i]; p.Namespace == s.namespace {
			on[p.Spec.NodeName] = append(on[p.Spec.NodeName], p)
		}
	}
	for i := range nodes {
		n := nodes[i].DeepCopy()
		if n.DeletionTimestamp != nil || n.Status.NodeInfo.BootID == "" {
			continue // not booted yet
		}
		pods := on[n.Name]
		if s.noteNFD(n, fakenode.NFDPublishes(n, pods)) {
			pods = slices.DeleteFunc(slices.Clone(pods), func(p *corev1.Pod) bool {
				return p.Labels[render.LabelState] == string(state.NodeFeatureDiscovery)
			})
		}
		changed := fakenode.Apply(n, pods, s.configs(ctx))
		var err error
		switch {
		case changed.Labels:
			// Labels first; the status follows at the next step.
			err = s.c.Update(ctx, n)
		case changed.Status:
			err = s.c.Status().Update(ctx, n)
		}
		if err != nil && !apierrors.IsConflict(err) && !apierrors.IsNotFound(err) {
			return err
		}
	}
	return nil
}

func (s *Cluster) syncNode(ctx context.Context, ds *appsv1.DaemonSet, node *corev1.Node, pods []corev1.Pod) error {
	if ds.DeletionTimestamp != nil {
		return nil
	}
	var existing *corev1.Pod
	for i := range pods {
		p := &pods[i]
		if p.Spec.NodeName == node.Name && metav1.IsControlledBy(p, ds) && p.DeletionTimestamp == nil {
			existing = p
		}
	}
	if existing == nil {
		// The real controller adopts an orphan its selector matches, as
		// when a DaemonSet pruned with its pods orphaned is applied again.
		adopted, err := s.adopt(ctx, ds, node.Name, pods)
		if err != nil {
			return err
		}
		existing = adopted
	}
	matches, err := nodeaffinity.GetRequiredNodeAffinity(&corev1.Pod{Spec: ds.Spec.Template.Spec}).Match(node)
	if err != nil {
		return err
	}
	switch {
	case matches && existing == nil && !repelled(ds, node.Name, pods):
		return s.c.Create(ctx, s.podFor(ds, node.Name))
	case !matches && existing != nil:
		return client.IgnoreNotFound(s.c.Delete(ctx, existing, client.GracePeriodSeconds(0)))
	case existing != nil && outdated(ds, existing):
		// A rolling update replaces a pod of an older template.
		return client.IgnoreNotFound(s.c.Delete(ctx, existing, client.GracePeriodSeconds(0)))
	}
	return nil
}

// adopt makes the DaemonSet the controller of an orphaned pod on the node
// that its selector matches; nil when there is none.
func (s *Cluster) adopt(ctx context.Context, ds *appsv1.DaemonSet, node string, pods []corev1.Pod) (*corev1.Pod, error) {
	s.mu.Lock()
	held := s.adoptionHeld
	s.mu.Unlock()
	if held {
		return nil, nil
	}
	sel, err := metav1.LabelSelectorAsSelector(ds.Spec.Selector)
	if err != nil {
		return nil, err
	}
	for i := range pods {
		p := &pods[i]
		if p.Namespace != ds.Namespace || p.Spec.NodeName != node || p.DeletionTimestamp != nil ||
			metav1.GetControllerOf(p) != nil || !sel.Matches(labels.Set(p.Labels)) {
			continue
		}
		base := p.DeepCopy()
		p.OwnerReferences = append(p.OwnerReferences, metav1.OwnerReference{
			APIVersion: "apps/v1", Kind: "DaemonSet", Name: ds.Name, UID: ds.UID, Controller: ptr.To(true)})
		if err := s.c.Patch(ctx, p, client.MergeFrom(base)); err != nil {
			return nil, client.IgnoreNotFound(err)
		}
		return p, nil
	}
	return nil, nil
}

// repelled reports whether the scheduler would keep the DaemonSet's pod off
// the node: a pod there, terminating or not, matches the template's
// required anti-affinity by hostname (one driver per node). The real
// DaemonSet controller creates the pod and it stays Pending, unbound,
// which the operator does not see on the node; here it is not created.
func repelled(ds *appsv1.DaemonSet, node string, pods []corev1.Pod) bool {
	a := ds.Spec.Template.Spec.Affinity
	if a == nil || a.PodAntiAffinity == nil {
		return false
	}
	for _, term := range a.PodAntiAffinity.RequiredDuringSchedulingIgnoredDuringExecution {
		sel, err := metav1.LabelSelectorAsSelector(term.LabelSelector)
		if err != nil || term.TopologyKey != corev1.LabelHostname {
			continue
		}
		for i := range pods {
			if p := &pods[i]; p.Spec.NodeName == node && sel.Matches(labels.Set(p.Labels)) {
				return true
			}
		}
	}
	return false
}

// outdated reports whether a RollingUpdate DaemonSet's pod runs an older
// template than the DaemonSet's.
func outdated(ds *appsv1.DaemonSet, p *corev1.Pod) bool {
	return ds.Spec.UpdateStrategy.Type != appsv1.OnDeleteDaemonSetStrategyType &&
		p.Annotations[render.AnnotationTemplateHash] != ds.Spec.Template.Annotations[render.AnnotationTemplateHash]
}

func (s *Cluster) podFor(ds *appsv1.DaemonSet, node string) *corev1.Pod {
	tpl := ds.Spec.Template
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			GenerateName: ds.Name + "-",
			Namespace:    ds.Namespace,
			Labels:       tpl.Labels,
			Annotations:  tpl.Annotations,
			OwnerReferences: []metav1.OwnerReference{{
				APIVersion: "apps/v1", Kind: "DaemonSet", Name: ds.Name, UID: ds.UID, Controller: ptr.To(true),
			}},
		},
		Spec: func() corev1.PodSpec {
			spec := *tpl.Spec.DeepCopy()
			spec.NodeName = node
			return spec
		}(),
	}
}

// configs looks up the device plugin's configuration files in the
// simulated Cluster's ConfigMaps, as the kubelet mounts them.
func (s *Cluster) configs(ctx context.Context) fakenode.ConfigLookup {
	return func(namespace, name, key string) (string, bool) {
		cm := &corev1.ConfigMap{}
		if err := s.c.Get(ctx, client.ObjectKey{Namespace: namespace, Name: name}, cm); err != nil {
			return "", false
		}
		v, ok := cm.Data[key]
		return v, ok
	}
}
