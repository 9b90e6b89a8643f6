//go:build e2e

package e2e

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/watch"
	"sigs.k8s.io/controller-runtime/pkg/client"

	gpuv1 "github.com/gpu-operator/gpu-operator/api/v1"
	"github.com/gpu-operator/gpu-operator/internal/test/crdschema"
)

var (
	root   = crdschema.RepoRoot()
	simDir = filepath.Join(root, "_output", "e2e")
	states = []string{"driver", "container-toolkit", "device-plugin", "dcgm-exporter", "gpu-feature-discovery"}
	// prerequisites of each state on a node, as the state graph declares:
	// the driver and the toolkit start side by side.
	prerequisites = map[string][]string{
		"device-plugin":         {"driver", "container-toolkit"},
		"dcgm-exporter":         {"driver", "container-toolkit", "device-plugin"},
		"gpu-feature-discovery": {"driver", "container-toolkit", "device-plugin"},
	}
)

// sh runs a repository script or binary with the simulated cluster's
// environment and returns its output.
func sh(name string, args ...string) (string, error) {
	cmd := exec.Command(filepath.Join(root, name), args...)
	cmd.Dir = root
	cmd.Env = append(os.Environ(), "SIM_DIR="+simDir, "KUBECONFIG="+filepath.Join(simDir, "kubeconfig"))
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	if err != nil {
		return out.String(), fmt.Errorf("%s %s: %w\n%s", name, strings.Join(args, " "), err, out.String())
	}
	return out.String(), nil
}

// operator is the operator process, run locally as its ServiceAccount.
type operator struct {
	cmd *exec.Cmd
}

func startOperator() *operator {
	token, err := sh("bin/kubectl", "create", "token", "-n", "gpu-operator", "gpu-operator", "--duration=2h")
	Expect(err).NotTo(HaveOccurred())
	cfg, err := sh("hack/sim/token-kubeconfig.sh", strings.TrimSpace(token), "gpu-operator")
	Expect(err).NotTo(HaveOccurred())
	path := filepath.Join(simDir, "operator.kubeconfig")
	Expect(os.WriteFile(path, []byte(cfg), 0o600)).To(Succeed())
	logFile, err := os.OpenFile(filepath.Join(simDir, "logs", "operator.log"), os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	Expect(err).NotTo(HaveOccurred())
	cmd := exec.Command(filepath.Join(root, "bin", "gpu-operator"), "--leader-elect",
		"--metrics-bind-address=127.0.0.1:18180", "--health-probe-bind-address=127.0.0.1:18181",
		"--zap-encoder=console", "--ready-grace-period=5s")
	cmd.Env = append(os.Environ(), "KUBECONFIG="+path, "OPERATOR_NAMESPACE=gpu-operator")
	cmd.Stdout, cmd.Stderr = logFile, logFile
	Expect(cmd.Start()).To(Succeed())
	return &operator{cmd: cmd}
}

// kill sends SIGKILL: no cleanup, no lease release, as in a crash.
func (o *operator) kill() {
	if o == nil || o.cmd.Process == nil {
		return
	}
	_ = o.cmd.Process.Kill()
	_ = o.cmd.Wait()
}

// labelHistory records, from a watch on nodes, when each node's state
// label first took each value.
type labelHistory struct {
	mu    sync.Mutex
	times map[string]time.Time // node/state/value -> first seen
}

func watchLabels(ctx context.Context, c client.WithWatch) *labelHistory {
	h := &labelHistory{times: map[string]time.Time{}}
	w, err := c.Watch(ctx, &corev1.NodeList{})
	Expect(err).NotTo(HaveOccurred())
	go func() {
		defer w.Stop()
		for ev := range w.ResultChan() {
			if ev.Type == watch.Error {
				return
			}
			n, ok := ev.Object.(*corev1.Node)
			if !ok {
				continue
			}
			h.record(n)
		}
	}()
	return h
}

func (h *labelHistory) record(n *corev1.Node) {
	h.mu.Lock()
	defer h.mu.Unlock()
	now := time.Now()
	for _, s := range states {
		if v, ok := n.Labels[gpuv1.StateLabel(s)]; ok {
			key := n.Name + "/" + s + "/" + v
			if _, seen := h.times[key]; !seen {
				h.times[key] = now
			}
		}
	}
}

// forget drops a node's history, before a scenario that resets it.
func (h *labelHistory) forget(node string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for k := range h.times {
		if strings.HasPrefix(k, node+"/") {
			delete(h.times, k)
		}
	}
}

// firstSeen returns when a node's state label was first seen with value.
func (h *labelHistory) firstSeen(node, state, value string) (time.Time, bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	t, ok := h.times[node+"/"+state+"/"+value]
	return t, ok
}
