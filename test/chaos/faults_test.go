//go:build chaos

package chaos

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"

	gpuv1 "github.com/gpu-operator/gpu-operator/api/v1"
	"github.com/gpu-operator/gpu-operator/internal/test/simcluster"
)

// User marks the chaos run puts on every node: they must survive it.
const (
	userLabel    = "chaos.example.com/owner"
	userLabelVal = "team-a"
	userTaintKey = "chaos.example.com/maintenance"
)

// restartProcess stops a process of the simulated cluster (SIGKILL, as a
// crash would) and starts it again with the same command line, changed by
// mutate if given, after down.
func (r *chaosRun) restartProcess(ctx context.Context, name string, down time.Duration, mutate func([]string) []string) error {
	pidsPath := filepath.Join(r.s.Dir, "pids")
	raw, err := os.ReadFile(pidsPath)
	if err != nil {
		return err
	}
	lines := strings.Split(strings.TrimSpace(string(raw)), "\n")
	idx, pid := -1, 0
	for i, l := range lines {
		if f := strings.Fields(l); len(f) == 2 && f[0] == name {
			idx = i
			pid, _ = strconv.Atoi(f[1])
		}
	}
	if idx < 0 {
		return fmt.Errorf("no %s in %s", name, pidsPath)
	}
	cmdline, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
	if err != nil {
		return fmt.Errorf("reading the command line of %s: %w", name, err)
	}
	args := strings.Split(strings.TrimRight(string(cmdline), "\x00"), "\x00")
	if mutate != nil {
		args = mutate(args)
	}
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		return err
	}
	for syscall.Kill(pid, 0) == nil {
		time.Sleep(50 * time.Millisecond)
	}
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(down):
	}
	logFile, err := os.OpenFile(r.s.LogFile(name), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	cmd := exec.Command(args[0], args[1:]...)
	cmd.Dir = r.s.Root
	cmd.Stdout, cmd.Stderr = logFile, logFile
	if err := cmd.Start(); err != nil {
		logFile.Close()
		return err
	}
	go func() { _ = cmd.Wait(); logFile.Close() }()
	lines[idx] = fmt.Sprintf("%s %d", name, cmd.Process.Pid)
	if err := os.WriteFile(pidsPath, []byte(strings.Join(lines, "\n")+"\n"), 0o644); err != nil {
		return err
	}
	return simcluster.Poll(ctx, 2*time.Minute, 300*time.Millisecond, func() (bool, string, error) {
		_, err := r.s.Clientset.Discovery().RESTClient().Get().AbsPath("/readyz").DoRaw(ctx)
		return err == nil, "waiting for the API server after restarting " + name, nil
	})
}

// inflight sets the API server's limits of requests in flight: a few make
// it answer 429 to whatever exceeds them; 0 lifts them, as the simulated
// cluster runs.
func inflight(requests, mutating int) func([]string) []string {
	return func(args []string) []string {
		out := make([]string, 0, len(args))
		for _, a := range args {
			switch {
			case strings.HasPrefix(a, "--max-requests-inflight="):
				a = fmt.Sprintf("--max-requests-inflight=%d", requests)
			case strings.HasPrefix(a, "--max-mutating-requests-inflight="):
				a = fmt.Sprintf("--max-mutating-requests-inflight=%d", mutating)
			}
			out = append(out, a)
		}
		return out
	}
}

// markNodes puts the user's label and taint on the nodes.
func (r *chaosRun) markNodes(ctx context.Context, names []string) error {
	return simcluster.Parallel(names, 16, func(name string) error {
		return r.editNode(ctx, name, func(n *corev1.Node) {
			n.Labels[userLabel] = userLabelVal
			for _, t := range n.Spec.Taints {
				if t.Key == userTaintKey {
					return
				}
			}
			n.Spec.Taints = append(n.Spec.Taints, corev1.Taint{Key: userTaintKey, Value: "soon", Effect: corev1.TaintEffectPreferNoSchedule})
		})
	})
}

// editNode changes a node as a user with kubectl edit would, retrying on
// conflicts.
func (r *chaosRun) editNode(ctx context.Context, name string, edit func(*corev1.Node)) error {
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		n, err := r.s.Clientset.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if n.Labels == nil {
			n.Labels = map[string]string{}
		}
		edit(n)
		_, err = r.s.Clientset.CoreV1().Nodes().Update(ctx, n, metav1.UpdateOptions{})
		return err
	})
}

// userMarksLost counts the nodes missing the user's label or taint.
func (r *chaosRun) userMarksLost(ctx context.Context, names []string) (int, error) {
	lost := 0
	for _, name := range names {
		n, err := r.s.Clientset.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			continue
		}
		if err != nil {
			return lost, err
		}
		tainted := false
		for _, t := range n.Spec.Taints {
			tainted = tainted || t.Key == userTaintKey
		}
		if n.Labels[userLabel] != userLabelVal || !tainted {
			lost++
		}
	}
	return lost, nil
}

// addNode creates a GPU node like template, as NFD labels one, with none
// of the operator's labels or annotations.
func (r *chaosRun) addNode(ctx context.Context, template, name string) error {
	t, err := r.s.Clientset.CoreV1().Nodes().Get(ctx, template, metav1.GetOptions{})
	if err != nil {
		return err
	}
	n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{}, Annotations: map[string]string{}}}
	for k, v := range t.Labels {
		if !strings.HasPrefix(k, "nvidia.com/") {
			n.Labels[k] = v
		}
	}
	n.Labels[corev1.LabelHostname] = name
	for k, v := range t.Annotations {
		if !strings.HasPrefix(k, "nvidia.com/") {
			n.Annotations[k] = v
		}
	}
	n.Spec.Taints = t.Spec.Taints
	_, err = r.s.Clientset.CoreV1().Nodes().Create(ctx, n, metav1.CreateOptions{})
	return err
}

// setVersion changes the policy's driver version.
func (r *chaosRun) setVersion(ctx context.Context, v gpuv1.DriverVersion) error {
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		cp := &gpuv1.ClusterPolicy{}
		if err := r.s.Client.Get(ctx, keyOf(policyName), cp); err != nil {
			return err
		}
		cp.Spec.Driver.Version = v
		return r.s.Client.Update(ctx, cp)
	})
}

// editPolicy changes the policy as a user with kubectl edit would.
func (r *chaosRun) editPolicy(ctx context.Context, edit func(*gpuv1.ClusterPolicy)) error {
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		cp := &gpuv1.ClusterPolicy{}
		if err := r.s.Client.Get(ctx, keyOf(policyName), cp); err != nil {
			return err
		}
		edit(cp)
		return r.s.Client.Update(ctx, cp)
	})
}

// editDaemonSetEnv adds an environment variable to a DaemonSet's first
// container, as a user's kubectl edit would: the operator puts it back.
func (r *chaosRun) editDaemonSetEnv(ctx context.Context, name string) error {
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		ds, err := r.s.Clientset.AppsV1().DaemonSets(namespace).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		c := &ds.Spec.Template.Spec.Containers[0]
		c.Env = append(c.Env, corev1.EnvVar{Name: "EDITED_BY_A_USER", Value: "yes"})
		_, err = r.s.Clientset.AppsV1().DaemonSets(namespace).Update(ctx, ds, metav1.UpdateOptions{})
		return err
	})
}
