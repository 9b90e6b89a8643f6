//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/watch"
	"sigs.k8s.io/controller-runtime/pkg/client"

	gpuv1 "github.com/gpu-operator/gpu-operator/api/v1"
	"github.com/gpu-operator/gpu-operator/internal/test/crdschema"
	"github.com/gpu-operator/gpu-operator/internal/test/fixture"
	"github.com/gpu-operator/gpu-operator/internal/test/simcluster"
)

var (
	root = crdschema.RepoRoot()
	// simDir is this process's cluster's state directory, set by
	// BeforeSuite: make test-e2e runs the specs in E2E_PROCS processes,
	// each on a cluster of its own.
	simDir string
	states = []string{"driver", "container-toolkit", "device-plugin", "dcgm-exporter", "gpu-feature-discovery"}
	// proofState is the CUDA workload proof's, after the device plugin:
	// the last word on a node's readiness.
	proofState = "cuda-workload"
	// prerequisites of each state's first start on a node, as the state
	// graph declares: driver, toolkit, device plugin, then the rest.
	prerequisites = map[string][]string{
		"container-toolkit":     {"driver"},
		"device-plugin":         {"driver", "container-toolkit"},
		"dcgm-exporter":         {"driver", "container-toolkit", "device-plugin"},
		"gpu-feature-discovery": {"driver", "container-toolkit", "device-plugin"},
		proofState:              {"driver", "container-toolkit", "device-plugin"},
	}
	// sim is the suite's cluster, up from BeforeSuite on.
	sim *simcluster.Cluster
)

// output runs a repository binary with the simulated cluster's
// environment and returns its standard output alone.
func output(name string, args ...string) (string, error) { return sim.Output(name, args...) }

// sh runs a repository script or binary with the simulated cluster's
// environment and returns its output, which the error of a failure
// carries too: the suite's cluster has no log of its own.
func sh(name string, args ...string) (string, error) {
	out, err := sim.Run(name, args...)
	if err != nil {
		return out, fmt.Errorf("%w\n%s", err, out)
	}
	return out, nil
}

// portOffset shifts every port this process's cluster listens on, apart
// from the other processes' (hack/sim/ports.env).
func portOffset() int { return 100 * (GinkgoParallelProcess() - 1) }

// The ports of the operator startOperator runs, for the first process;
// each further one adds 10, short of the benchmark's 18280.
const (
	operatorMetricsPort = 18180
	operatorProbePort   = 18181
)

// operatorAddr is where this process's operator listens on a port.
func operatorAddr(port int) string {
	return fmt.Sprintf("127.0.0.1:%d", port+10*(GinkgoParallelProcess()-1))
}

// operator is the operator process, run locally as its ServiceAccount.
type operator struct{ p *simcluster.Operator }

// startOperator starts the operator with the suites' short timers and
// returns at once: the specs wait for what it does.
func startOperator() *operator {
	// The suites' short timers, but a grace period that outlasts a pod
	// replaced by a rolling update on the simulated nodes.
	timers := fixture.Timers()
	timers.ReadyGrace = 5 * time.Second
	args := append([]string{"--leader-elect", "--metrics-bind-address=" + operatorAddr(operatorMetricsPort),
		"--health-probe-bind-address=" + operatorAddr(operatorProbePort),
		"--zap-encoder=console"}, timers.Args()...)
	p, err := sim.StartOperator(context.Background(), simcluster.OperatorOptions{Args: args})
	Expect(err).NotTo(HaveOccurred())
	return &operator{p: p}
}

// kill sends SIGKILL: no cleanup, no lease release, as in a crash.
func (o *operator) kill() {
	if o != nil {
		o.p.Kill()
	}
}

// labelHistory records, from a watch on nodes, when each node's state
// label first took each value. It records changes only: a node event that
// carries a value the label already had (the one a boot ID change brings,
// before the operator reset the chain) says nothing of when it took it.
type labelHistory struct {
	mu       sync.Mutex
	times    map[string]time.Time // node/state/value -> first seen
	revs     map[string]int64     // node/state/value -> revision first seen at
	last     map[string]string    // node/state -> value last seen, "" for none
	forgotAt map[string]int64     // node -> the revision at which its history was last forgotten
}

func watchLabels(ctx context.Context, c client.WithWatch) *labelHistory {
	h := &labelHistory{times: map[string]time.Time{}, revs: map[string]int64{}, last: map[string]string{}, forgotAt: map[string]int64{}}
	follow(ctx, c, &corev1.NodeList{}, func(_ watch.EventType, o client.Object) {
		if n, ok := o.(*corev1.Node); ok {
			h.record(n)
		}
	})
	return h
}

// follow calls observe, from a goroutine, with each event of a watch on
// list until the watch ends (ctx done, or an error event).
func follow(ctx context.Context, c client.WithWatch, list client.ObjectList, observe func(watch.EventType, client.Object), opts ...client.ListOption) {
	w, err := c.Watch(ctx, list, opts...)
	Expect(err).NotTo(HaveOccurred())
	go func() {
		defer w.Stop()
		for ev := range w.ResultChan() {
			if ev.Type == watch.Error {
				return
			}
			if o, ok := ev.Object.(client.Object); ok {
				observe(ev.Type, o)
			}
		}
	}()
}

func (h *labelHistory) record(n *corev1.Node) {
	h.mu.Lock()
	defer h.mu.Unlock()
	now := time.Now()
	for _, s := range states {
		key := n.Name + "/" + s
		v := n.Labels[gpuv1.StateLabel(s)]
		if prev, seen := h.last[key]; seen && prev == v {
			continue
		}
		h.last[key] = v
		if _, seen := h.times[key+"/"+v]; v != "" && !seen {
			h.times[key+"/"+v] = now
			if r, ok := revision(n); ok {
				h.revs[key+"/"+v] = r
			}
		}
	}
}

// forget drops a node's history, before a scenario that resets it: from
// now on, the values its labels take. It keeps the cluster's revision
// now: a pod created at a lower one is from before.
func (h *labelHistory) forget(node string) {
	nodes := &corev1.NodeList{}
	Expect(k8s.List(context.Background(), nodes, client.Limit(1))).To(Succeed())
	rev, err := strconv.ParseInt(nodes.ResourceVersion, 10, 64)
	Expect(err).NotTo(HaveOccurred(), "the list's resourceVersion")
	h.mu.Lock()
	defer h.mu.Unlock()
	h.forgotAt[node] = rev
	for k := range h.times {
		if strings.HasPrefix(k, node+"/") {
			delete(h.times, k)
			delete(h.revs, k)
		}
	}
}

// forgotten returns the revision at which the node's history was last
// forgotten.
func (h *labelHistory) forgotten(node string) (int64, bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	r, ok := h.forgotAt[node]
	return r, ok
}

// forgetValue drops when a node's state labels were first seen with value:
// a spec that checks no state took it from now on keeps the rest, which
// the order of the node's chain is checked against.
func (h *labelHistory) forgetValue(node, value string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for k := range h.times {
		if strings.HasPrefix(k, node+"/") && strings.HasSuffix(k, "/"+value) {
			delete(h.times, k)
			delete(h.revs, k)
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

// firstRevision returns the revision of the node at which its state label
// was first seen with value: the revision of the write that set it.
func (h *labelHistory) firstRevision(node, state, value string) (int64, bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	r, ok := h.revs[node+"/"+state+"/"+value]
	return r, ok
}
