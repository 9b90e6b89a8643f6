package simcluster

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// UnrelatedNamespace holds the pods that have nothing to do with GPUs:
// the operator must not cache or touch them.
const UnrelatedNamespace = "bench-unrelated"

// CreateUnrelatedPods places perNode ordinary pods on every node, bound
// directly (as many as a cluster's real workloads would be, so that an
// operator watching all pods pays for it), and waits until kwok reports
// them all running.
func CreateUnrelatedPods(ctx context.Context, cs kubernetes.Interface, nodes []string, perNode int) error {
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: UnrelatedNamespace}}
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
	err := Parallel(slots, 32, func(s slot) error {
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
		_, err := cs.CoreV1().Pods(UnrelatedNamespace).Create(ctx, pod, metav1.CreateOptions{})
		if apierrors.IsAlreadyExists(err) {
			return nil
		}
		return err
	})
	if err != nil {
		return fmt.Errorf("creating unrelated pods: %w", err)
	}
	want := len(slots)
	return Poll(ctx, 10*time.Minute, 5*time.Second, func() (bool, string, error) {
		running, err := CountPods(ctx, cs, UnrelatedNamespace, "", "status.phase=Running")
		return running == want, fmt.Sprintf("%d of %d unrelated pods running", running, want), err
	})
}

// CountPods counts a namespace's pods matching the selectors, a page at a
// time so that the API server never builds one huge list.
func CountPods(ctx context.Context, cs kubernetes.Interface, ns, labelSelector, fieldSelector string) (int, error) {
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
