package controllertest

import (
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"

	gpuv1 "github.com/gpu-operator/gpu-operator/api/v1"
	"github.com/gpu-operator/gpu-operator/internal/upgrade"
)

// StateLog follows one state label of the test's own nodes from a watch:
// each node's sequence of values, and the most nodes out of service at
// once. A node first seen without the label starts its sequence at the
// label's first value. A watch delivers after a read returns: check a
// sequence with Eventually.
type StateLog[S ~string] struct {
	label    string
	counts   func(S) bool
	describe func(*corev1.Node) string
	// unrecorded says which changes are no step of the machine the log
	// follows; nil records every change.
	unrecorded func(from, to S) bool

	mu        sync.Mutex
	start     time.Time
	current   map[string]S
	seq       map[string][]S
	lines     []string
	maxAtOnce int
}

// RecordStates starts a StateLog of label on the fixture's nodes: counts
// says which values take a node out of service, describe adds the columns
// of a line of the log.
func RecordStates[S ~string](f *Fixture, label string, counts func(S) bool, describe func(*corev1.Node) string) *StateLog[S] {
	return recordStates(f, label, counts, describe, nil)
}

func recordStates[S ~string](f *Fixture, label string, counts func(S) bool, describe func(*corev1.Node) string,
	unrecorded func(from, to S) bool) *StateLog[S] {
	l := &StateLog[S]{label: label, counts: counts, describe: describe, unrecorded: unrecorded, start: time.Now(),
		current: map[string]S{}, seq: map[string][]S{}}
	f.WatchOwnNodes(l.observe)
	return l
}

// RecordUpgrades logs the nodes' driver upgrade states.
func (f *Fixture) RecordUpgrades() *StateLog[gpuv1.UpgradeState] {
	describe := func(n *corev1.Node) string {
		return fmt.Sprintf("cordoned=%t driver=%s version=%s", n.Spec.Unschedulable,
			n.Labels[gpuv1.StateLabel("driver")], n.Labels[gpuv1.LabelDriverVersion])
	}
	// A node first marked upgrade-done, its driver pod current, went
	// through no upgrade: sequences hold the upgrades alone.
	firstMark := func(from, to gpuv1.UpgradeState) bool { return from == "" && to == gpuv1.UpgradeDone }
	return recordStates(f, gpuv1.LabelUpgradeState, upgrade.InProgress, describe, firstMark)
}

func (l *StateLog[S]) observe(n *corev1.Node) {
	l.mu.Lock()
	defer l.mu.Unlock()
	st := S(n.Labels[l.label])
	if l.current[n.Name] == st {
		return
	}
	from := l.current[n.Name]
	l.current[n.Name] = st
	if l.unrecorded != nil && l.unrecorded(from, st) {
		return
	}
	l.seq[n.Name] = append(l.seq[n.Name], st)
	l.lines = append(l.lines, fmt.Sprintf("%6.1fs %-40s %-24s %s", time.Since(l.start).Seconds(), n.Name, st, l.describe(n)))
	busy := 0
	for _, s := range l.current {
		if l.counts(s) {
			busy++
		}
	}
	l.maxAtOnce = max(l.maxAtOnce, busy)
}

// Sequence is the values a node's label went through.
func (l *StateLog[S]) Sequence(node string) []S {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.seq[node])
}

// Peak is the most nodes out of service at once.
func (l *StateLog[S]) Peak() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.maxAtOnce
}

func (l *StateLog[S]) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return strings.Join(l.lines, "\n")
}

// ExpectUpgraded waits until an upgrade of the node, begun since log
// started, ended: the node is upgrade-done and its sequence in the log
// ends there. A node is upgrade-done as soon as its driver pod is current,
// so the label alone says nothing of an upgrade the test just caused.
func (f *Fixture) ExpectUpgraded(log *StateLog[gpuv1.UpgradeState], node string) {
	f.T.Helper()
	f.ExpectUpgradedWithin(log, node, 2*Timeout)
}

// ExpectUpgradedWithin is ExpectUpgraded with its own bound.
func (f *Fixture) ExpectUpgradedWithin(log *StateLog[gpuv1.UpgradeState], node string, within time.Duration) {
	f.T.Helper()
	NewWithT(f.T).Eventually(func() string {
		seq := log.Sequence(node)
		label := f.Node(node).Labels[gpuv1.LabelUpgradeState]
		if len(seq) > 0 && seq[len(seq)-1] == gpuv1.UpgradeDone && label == string(gpuv1.UpgradeDone) {
			return ""
		}
		return fmt.Sprintf("node %s: label %q, upgrade states since the log started %v", node, label, seq)
	}, within, Interval).Should(BeEmpty())
}
