package controllertest

import (
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

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
	l := &StateLog[S]{label: label, counts: counts, describe: describe, start: time.Now(),
		current: map[string]S{}, seq: map[string][]S{}}
	f.WatchOwnNodes(l.observe)
	return l
}

// RecordUpgrades logs the nodes' driver upgrade states.
func (f *Fixture) RecordUpgrades() *StateLog[gpuv1.UpgradeState] {
	return RecordStates(f, gpuv1.LabelUpgradeState, upgrade.InProgress, func(n *corev1.Node) string {
		return fmt.Sprintf("cordoned=%t driver=%s version=%s", n.Spec.Unschedulable,
			n.Labels[gpuv1.StateLabel("driver")], n.Labels[gpuv1.LabelDriverVersion])
	})
}

func (l *StateLog[S]) observe(n *corev1.Node) {
	l.mu.Lock()
	defer l.mu.Unlock()
	st := S(n.Labels[l.label])
	if l.current[n.Name] == st {
		return
	}
	l.current[n.Name] = st
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
