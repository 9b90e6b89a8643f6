package main

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	nodev1 "k8s.io/api/node/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"

	"github.com/gpu-operator/gpu-operator/internal/render"
	"github.com/gpu-operator/gpu-operator/internal/test/simcluster"
)

// floorWorkloads are the operator's workloads as rendered, without the
// operator: what the floor run applies.
type floorWorkloads struct {
	DaemonSets      []appsv1.DaemonSet
	Deployments     []appsv1.Deployment
	ServiceAccounts []string
	// RuntimeClasses the pods name: without them, pod creation is refused.
	RuntimeClasses []nodev1.RuntimeClass
	// Pods is how many operand pods ran when the ordered rollout was done.
	Pods int
}

// operandSelector selects the operator's objects and their pods.
var operandSelector = render.LabelManagedBy + "=" + render.ManagedBy

// captureWorkloads reads the operand DaemonSets and Deployments the operator
// created, with its per-node gates taken out: the same pods on the same
// nodes, but all at once.
func captureWorkloads(ctx context.Context, cs kubernetes.Interface, ns string) (*floorWorkloads, error) {
	opts := metav1.ListOptions{LabelSelector: operandSelector}
	dss, err := cs.AppsV1().DaemonSets(ns).List(ctx, opts)
	if err != nil {
		return nil, err
	}
	deps, err := cs.AppsV1().Deployments(ns).List(ctx, opts)
	if err != nil {
		return nil, err
	}
	rcs, err := cs.NodeV1().RuntimeClasses().List(ctx, opts)
	if err != nil {
		return nil, err
	}
	pods, err := simcluster.CountPods(ctx, cs, ns, operandSelector, "status.phase=Running")
	if err != nil {
		return nil, err
	}
	w := &floorWorkloads{Pods: pods}
	for _, rc := range rcs.Items {
		w.RuntimeClasses = append(w.RuntimeClasses, nodev1.RuntimeClass{
			ObjectMeta: metav1.ObjectMeta{Name: rc.Name, Labels: rc.Labels}, Handler: rc.Handler, Scheduling: rc.Scheduling,
		})
	}
	accounts := map[string]bool{}
	keep := func(meta metav1.ObjectMeta, tmpl *corev1.PodTemplateSpec) metav1.ObjectMeta {
		ungate(&tmpl.Spec)
		if sa := tmpl.Spec.ServiceAccountName; sa != "" && !accounts[sa] {
			accounts[sa] = true
			w.ServiceAccounts = append(w.ServiceAccounts, sa)
		}
		return metav1.ObjectMeta{Name: meta.Name, Namespace: meta.Namespace, Labels: meta.Labels, Annotations: meta.Annotations}
	}
	for _, ds := range dss.Items {
		spec := ds.Spec
		w.DaemonSets = append(w.DaemonSets, appsv1.DaemonSet{ObjectMeta: keep(ds.ObjectMeta, &spec.Template), Spec: spec})
	}
	for _, d := range deps.Items {
		spec := d.Spec
		w.Deployments = append(w.Deployments, appsv1.Deployment{ObjectMeta: keep(d.ObjectMeta, &spec.Template), Spec: spec})
	}
	if len(w.DaemonSets) == 0 {
		return nil, fmt.Errorf("no operand DaemonSets in %s", ns)
	}
	return w, nil
}

// gpuNodeLabel is what NFD sets on a node with an NVIDIA PCI device; the
// floor selects GPU nodes by it, as the operator's own gpu.present does.
const gpuNodeLabel = "feature.node.kubernetes.io/pci-10de.present"

// ungate removes every node requirement on an nvidia.com/ label (the
// operator's gates: gpu.present, deploy, state and pool labels, which no
// node of the floor cluster carries) and requires an NVIDIA GPU instead.
// Requirements on other labels, such as the driver's OS release, stay.
func ungate(spec *corev1.PodSpec) {
	gated := false
	for k := range spec.NodeSelector {
		if strings.HasPrefix(k, "nvidia.com/") {
			delete(spec.NodeSelector, k)
			gated = true
		}
	}
	na := spec.Affinity
	if na != nil && na.NodeAffinity != nil && na.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution != nil {
		terms := na.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms
		for i := range terms {
			var kept []corev1.NodeSelectorRequirement
			termGated := false
			for _, r := range terms[i].MatchExpressions {
				if strings.HasPrefix(r.Key, "nvidia.com/") {
					termGated = true
					continue
				}
				kept = append(kept, r)
			}
			if termGated {
				kept = append(kept, corev1.NodeSelectorRequirement{Key: gpuNodeLabel, Operator: corev1.NodeSelectorOpIn, Values: []string{"true"}})
			}
			terms[i].MatchExpressions = kept
		}
	}
	if gated {
		if spec.NodeSelector == nil {
			spec.NodeSelector = map[string]string{}
		}
		spec.NodeSelector[gpuNodeLabel] = "true"
	}
}

// applyFloor creates the namespace, ServiceAccounts and RuntimeClasses, then
// the ungated workloads, on a fresh cluster; it returns when it started on
// the workloads.
func applyFloor(ctx context.Context, cs kubernetes.Interface, ns string, w *floorWorkloads) (time.Time, error) {
	nsObj := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns, Labels: map[string]string{"pod-security.kubernetes.io/enforce": "privileged"}}}
	if _, err := cs.CoreV1().Namespaces().Create(ctx, nsObj, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return time.Time{}, err
	}
	for _, sa := range w.ServiceAccounts {
		obj := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: sa, Namespace: ns}}
		if _, err := cs.CoreV1().ServiceAccounts(ns).Create(ctx, obj, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			return time.Time{}, err
		}
	}
	for i := range w.RuntimeClasses {
		if _, err := cs.NodeV1().RuntimeClasses().Create(ctx, &w.RuntimeClasses[i], metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			return time.Time{}, err
		}
	}
	start := time.Now()
	for i := range w.DaemonSets {
		if _, err := cs.AppsV1().DaemonSets(ns).Create(ctx, &w.DaemonSets[i], metav1.CreateOptions{}); err != nil {
			return time.Time{}, fmt.Errorf("floor DaemonSet %s: %w", w.DaemonSets[i].Name, err)
		}
	}
	for i := range w.Deployments {
		if _, err := cs.AppsV1().Deployments(ns).Create(ctx, &w.Deployments[i], metav1.CreateOptions{}); err != nil {
			return time.Time{}, fmt.Errorf("floor Deployment %s: %w", w.Deployments[i].Name, err)
		}
	}
	return start, nil
}

// readyPods follows a namespace's operand pods through an informer and
// records when the number of ready ones first reached a target.
type readyPods struct {
	mu      sync.Mutex
	ready   map[string]bool
	target  int
	reached time.Time
}

func watchReadyPods(ctx context.Context, cs kubernetes.Interface, ns string, target int) (*readyPods, error) {
	r := &readyPods{ready: map[string]bool{}, target: target}
	factory := informers.NewSharedInformerFactoryWithOptions(cs, 0, informers.WithNamespace(ns),
		informers.WithTweakListOptions(func(o *metav1.ListOptions) { o.LabelSelector = operandSelector }))
	inf := factory.Core().V1().Pods().Informer()
	if _, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { r.observe(obj, false) },
		UpdateFunc: func(_, obj any) { r.observe(obj, false) },
		DeleteFunc: func(obj any) { r.observe(obj, true) },
	}); err != nil {
		return nil, err
	}
	factory.Start(ctx.Done())
	if !cache.WaitForCacheSync(ctx.Done(), inf.HasSynced) {
		return nil, fmt.Errorf("pod informer did not sync")
	}
	return r, nil
}

func (r *readyPods) observe(obj any, deleted bool) {
	if tomb, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = tomb.Obj
	}
	p, ok := obj.(*corev1.Pod)
	if !ok {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if deleted || !podReady(p) {
		delete(r.ready, p.Name)
		return
	}
	r.ready[p.Name] = true
	if len(r.ready) >= r.target && r.reached.IsZero() {
		r.reached = time.Now()
	}
}

func podReady(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// wait returns when the target was first reached.
func (r *readyPods) wait(ctx context.Context, timeout, stall time.Duration) (time.Time, error) {
	start := time.Now()
	moved := sinceMoved(start)
	for {
		r.mu.Lock()
		at, ready := r.reached, len(r.ready)
		r.mu.Unlock()
		if !at.IsZero() {
			return at, nil
		}
		now := time.Now()
		switch {
		case moved.see(ready, now, time.Time{}) >= stall:
			return time.Time{}, fmt.Errorf("no operand pod got ready for %s: %d of %d ready", stall, ready, r.target)
		case now.Sub(start) >= timeout:
			return time.Time{}, fmt.Errorf("after %s: %d of %d operand pods ready", timeout, ready, r.target)
		}
		select {
		case <-ctx.Done():
			return time.Time{}, ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
}
