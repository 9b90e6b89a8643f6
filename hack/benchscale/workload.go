package main

import (
	"context"
	"fmt"
	"os"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
)

// unrelatedNamespace holds the pods that have nothing to do with GPUs: the
// operator must not cache or touch them.
const unrelatedNamespace = "bench-unrelated"

// parallel runs fn for each item on workers goroutines and returns the
// first error.
func parallel[T any](items []T, workers int, fn func(T) error) error {
	var (
		wg    sync.WaitGroup
		once  sync.Once
		first error
		next  = make(chan T)
	)
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for it := range next {
				if err := fn(it); err != nil {
					once.Do(func() { first = err })
				}
			}
		}()
	}
	for _, it := range items {
		next <- it
	}
	close(next)
	wg.Wait()
	return first
}

// createUnrelatedPods places perNode ordinary pods on every node, bound
// directly (as many as the cluster's real workloads would be), and waits
// until kwok reports them all running.
func createUnrelatedPods(ctx context.Context, cs kubernetes.Interface, nodes []string, perNode int) error {
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: unrelatedNamespace}}
	if _, err := cs.CoreV1().Namespaces().Create(ctx, ns, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return err
	}
	type slot struct {
		node string
		i    int
	}
	var slots []slot
	for _, n := range nodes {
		for i := range perNode {
			slots = append(slots, slot{n, i})
		}
	}
	err := parallel(slots, 32, func(s slot) error {
		pod := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{
				Name:   fmt.Sprintf("%s-%d", s.node, s.i),
				Labels: map[string]string{"app": "unrelated"},
			},
			Spec: corev1.PodSpec{
				NodeName:    s.node,
				Tolerations: []corev1.Toleration{{Key: "nvidia.com/gpu", Operator: corev1.TolerationOpExists}},
				Containers:  []corev1.Container{{Name: "app", Image: "registry.example/app:1"}},
			},
		}
		_, err := cs.CoreV1().Pods(unrelatedNamespace).Create(ctx, pod, metav1.CreateOptions{})
		if apierrors.IsAlreadyExists(err) {
			return nil
		}
		return err
	})
	if err != nil {
		return fmt.Errorf("creating unrelated pods: %w", err)
	}
	want := len(slots)
	return poll(ctx, 10*time.Minute, 5*time.Second, func() (bool, string, error) {
		running, err := countPods(ctx, cs, unrelatedNamespace, "", "status.phase=Running")
		return running == want, fmt.Sprintf("%d of %d unrelated pods running", running, want), err
	})
}

// countPods counts a namespace's pods matching the selectors, a page at a
// time so that the API server never builds one huge list.
func countPods(ctx context.Context, cs kubernetes.Interface, ns, labelSelector, fieldSelector string) (int, error) {
	n, cont := 0, ""
	for {
		opts := metav1.ListOptions{LabelSelector: labelSelector, FieldSelector: fieldSelector, Limit: 5000, Continue: cont}
		list, err := cs.CoreV1().Pods(ns).List(ctx, opts)
		if err != nil {
			return 0, err
		}
		n += len(list.Items)
		if cont = list.Continue; cont == "" {
			return n, nil
		}
	}
}

// poll calls check every interval until it is done or timeout passes; the
// timeout error carries check's last description of where things stand.
func poll(ctx context.Context, timeout, interval time.Duration, check func() (bool, string, error)) error {
	deadline := time.Now().Add(timeout)
	for {
		done, where, err := check()
		if err == nil && done {
			return nil
		}
		if time.Now().After(deadline) {
			if err != nil {
				return fmt.Errorf("after %s: %s: %w", timeout, where, err)
			}
			return fmt.Errorf("after %s: %s", timeout, where)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(interval):
		}
	}
}

// reboot does to each node what a reboot does as the API server sees it: a
// new boot ID, and every pod on it restarted by the kubelet (not ready
// until kwok's stage makes it ready again), as hack/sim/reboot.sh does.
func reboot(ctx context.Context, cs kubernetes.Interface, nodes []string) error {
	return parallel(nodes, 16, func(node string) error {
		bootID, err := os.ReadFile("/proc/sys/kernel/random/uuid")
		if err != nil {
			return err
		}
		patch := fmt.Sprintf(`{"status":{"nodeInfo":{"bootID":%q}}}`, string(bootID[:len(bootID)-1]))
		if _, err := cs.CoreV1().Nodes().Patch(ctx, node, types.MergePatchType, []byte(patch), metav1.PatchOptions{}, "status"); err != nil {
			return fmt.Errorf("rebooting %s: %w", node, err)
		}
		pods, err := cs.CoreV1().Pods("").List(ctx, metav1.ListOptions{FieldSelector: "spec.nodeName=" + node})
		if err != nil {
			return err
		}
		restarted := []byte(`{"status":{"phase":"Pending","conditions":[{"type":"Ready","status":"False"}],"podIP":null,"podIPs":null}}`)
		for _, p := range pods.Items {
			_, err := cs.CoreV1().Pods(p.Namespace).Patch(ctx, p.Name, types.MergePatchType, restarted, metav1.PatchOptions{}, "status")
			if err != nil && !apierrors.IsNotFound(err) {
				return fmt.Errorf("restarting pod %s/%s: %w", p.Namespace, p.Name, err)
			}
		}
		return nil
	})
}
