package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/gpu-operator/gpu-operator/internal/render"
	"github.com/gpu-operator/gpu-operator/internal/test/fakenode"
)

// fakeNodeAnnotation marks the nodes kwok plays, the only ones the agent
// touches.
const fakeNodeAnnotation = "kwok.x-k8s.io/node"

const byNode = "node"

func main() {
	kubeconfig := flag.String("kubeconfig", os.Getenv("KUBECONFIG"), "kubeconfig of the simulated cluster")
	namespace := flag.String("namespace", "gpu-operator", "namespace of the operator's pods")
	workers := flag.Int("workers", 4, "nodes handled at once")
	flag.Parse()
	if err := run(*kubeconfig, *namespace, *workers); err != nil {
		fmt.Fprintln(os.Stderr, "simagent:", err)
		os.Exit(1)
	}
}

// agent reconciles each fake node with the operator's pods on it.
type agent struct {
	cs    kubernetes.Interface
	nodes cache.Indexer
	pods  cache.Indexer
	// slices are the cluster's ResourceSlices, by node; nil where
	// resource.k8s.io/v1 is not served.
	slices cache.Indexer
	queue  workqueue.TypedRateLimitingInterface[string]
}

func run(kubeconfig, namespace string, workers int) error {
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		return err
	}
	cfg.QPS, cfg.Burst = 500, 1000
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()

	nodeInformers := informers.NewSharedInformerFactory(cs, 10*time.Minute)
	podInformers := informers.NewSharedInformerFactoryWithOptions(cs, 10*time.Minute, informers.WithNamespace(namespace),
		informers.WithTweakListOptions(func(o *metav1.ListOptions) {
			o.LabelSelector = labels.SelectorFromSet(labels.Set{render.LabelManagedBy: render.ManagedBy}).String()
		}))
	nodes := nodeInformers.Core().V1().Nodes().Informer()
	pods := podInformers.Core().V1().Pods().Informer()
	if err := pods.AddIndexers(cache.Indexers{byNode: func(o any) ([]string, error) {
		return []string{o.(*corev1.Pod).Spec.NodeName}, nil
	}}); err != nil {
		return err
	}
	a := &agent{cs: cs, nodes: nodes.GetIndexer(), pods: pods.GetIndexer(),
		queue: workqueue.NewTypedRateLimitingQueue(workqueue.DefaultTypedControllerRateLimiter[string]())}
	enqueueNode := func(o any) {
		if n, ok := o.(*corev1.Node); ok && n.Annotations[fakeNodeAnnotation] != "" {
			a.queue.Add(n.Name)
		}
	}
	enqueuePod := func(o any) {
		if d, ok := o.(cache.DeletedFinalStateUnknown); ok {
			o = d.Obj
		}
		if p, ok := o.(*corev1.Pod); ok && p.Spec.NodeName != "" {
			a.queue.Add(p.Spec.NodeName)
		}
	}
	if _, err := nodes.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: enqueueNode, UpdateFunc: func(_, o any) { enqueueNode(o) },
	}); err != nil {
		return err
	}
	if _, err := pods.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: enqueuePod, UpdateFunc: func(_, o any) { enqueuePod(o) }, DeleteFunc: enqueuePod,
	}); err != nil {
		return err
	}
	synced := []cache.InformerSynced{nodes.HasSynced, pods.HasSynced}
	if servesResourceSlices(cs.Discovery()) {
		slices := nodeInformers.Resource().V1().ResourceSlices().Informer()
		if err := slices.AddIndexers(cache.Indexers{byNode: slicesByNode}); err != nil {
			return err
		}
		a.slices = slices.GetIndexer()
		synced = append(synced, slices.HasSynced)
	}
	nodeInformers.Start(ctx.Done())
	podInformers.Start(ctx.Done())
	if !cache.WaitForCacheSync(ctx.Done(), synced...) {
		return fmt.Errorf("caches did not sync")
	}
	for range workers {
		go a.work(ctx)
	}
	<-ctx.Done()
	a.queue.ShutDown()
	return nil
}

func (a *agent) work(ctx context.Context) {
	for {
		name, quit := a.queue.Get()
		if quit {
			return
		}
		if err := a.sync(ctx, name); err != nil {
			if !apierrors.IsConflict(err) {
				fmt.Fprintf(os.Stderr, "simagent: node %s: %v\n", name, err)
			}
			a.queue.AddRateLimited(name)
		} else {
			a.queue.Forget(name)
		}
		a.queue.Done(name)
	}
}

// sync makes one node show what its operand pods do there.
func (a *agent) sync(ctx context.Context, name string) error {
	obj, ok, err := a.nodes.GetByKey(name)
	if err != nil || !ok {
		return err
	}
	node := obj.(*corev1.Node).DeepCopy()
	if node.Annotations[fakeNodeAnnotation] == "" {
		return nil
	}
	objs, err := a.pods.ByIndex(byNode, name)
	if err != nil {
		return err
	}
	var pods []*corev1.Pod
	for _, o := range objs {
		p := o.(*corev1.Pod)
		pods = append(pods, p)
		if err := a.answerDriverCheck(ctx, node, p); err != nil {
			return err
		}
		// A CUDA workload pod another writer changed meanwhile (the
		// operator deleting it) is ended at its next event, which
		// enqueues the node again: a conflict must not keep the node's
		// own sync, below, from running, nor back it off.
		if err := a.runWorkload(ctx, node, p); err != nil && !apierrors.IsConflict(err) {
			return err
		}
	}
	if err := a.syncSlices(ctx, node, pods); err != nil {
		return err
	}
	changed := fakenode.Apply(node, pods, a.configs(ctx))
	if changed.Labels {
		// The status, if it changed too, follows from the update's event.
		_, err = a.cs.CoreV1().Nodes().Update(ctx, node, metav1.UpdateOptions{})
		return client.IgnoreNotFound(err)
	}
	if changed.Status {
		_, err = a.cs.CoreV1().Nodes().UpdateStatus(ctx, node, metav1.UpdateOptions{})
	}
	return client.IgnoreNotFound(err)
}

// answerDriverCheck gives a driver pod on a node whose host runs its own
// driver the status of its check finding it; kwok leaves such pods alone
// (hack/sim/stages.sh).
func (a *agent) answerDriverCheck(ctx context.Context, node *corev1.Node, p *corev1.Pod) error {
	st := fakenode.DriverCheck(node, p)
	if st == nil || p.DeletionTimestamp != nil || len(p.Status.InitContainerStatuses) > 0 {
		return nil
	}
	pod := p.DeepCopy()
	pod.Status = *st
	_, err := a.cs.CoreV1().Pods(pod.Namespace).UpdateStatus(ctx, pod, metav1.UpdateOptions{})
	return client.IgnoreNotFound(err)
}

// runWorkload ends a CUDA workload pod on the node as the node's GPUs
// let it; kwok leaves such pods alone (hack/sim/stages.sh).
func (a *agent) runWorkload(ctx context.Context, node *corev1.Node, p *corev1.Pod) error {
	st := fakenode.WorkloadRun(node, p)
	if st == nil || p.DeletionTimestamp != nil {
		return nil
	}
	pod := p.DeepCopy()
	pod.Status = *st
	_, err := a.cs.CoreV1().Pods(pod.Namespace).UpdateStatus(ctx, pod, metav1.UpdateOptions{})
	return client.IgnoreNotFound(err)
}

// configs looks up the device plugin's configuration files, as the
// kubelet mounts them from ConfigMaps. Read live: only pods that name a
// configuration ask.
func (a *agent) configs(ctx context.Context) fakenode.ConfigLookup {
	return func(namespace, name, key string) (string, bool) {
		cm, err := a.cs.CoreV1().ConfigMaps(namespace).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return "", false
		}
		v, ok := cm.Data[key]
		return v, ok
	}
}
