package main

import (
	"context"
	"fmt"
	"os"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"

	"github.com/gpu-operator/gpu-operator/internal/test/simcluster"
)

// reboot does to each node what a reboot does as the API server sees it: a
// new boot ID, and every pod on it that had not ended restarted by the
// kubelet (not ready until kwok's stage makes it ready again); a pod that
// ended (a CUDA proof that succeeded) stays as it is, as hack/sim/reboot.sh
// does.
func reboot(ctx context.Context, cs kubernetes.Interface, nodes []string) error {
	return simcluster.Parallel(nodes, 16, func(node string) error {
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
			if p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed {
				continue
			}
			_, err := cs.CoreV1().Pods(p.Namespace).Patch(ctx, p.Name, types.MergePatchType, restarted, metav1.PatchOptions{}, "status")
			if err != nil && !apierrors.IsNotFound(err) {
				return fmt.Errorf("restarting pod %s/%s: %w", p.Namespace, p.Name, err)
			}
		}
		return nil
	})
}
