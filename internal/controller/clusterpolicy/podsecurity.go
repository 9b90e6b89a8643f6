package clusterpolicy

import (
	"context"
	"sync"

	"k8s.io/apimachinery/pkg/types"

	gpuv1 "github.com/gpu-operator/gpu-operator/api/v1"
	"github.com/gpu-operator/gpu-operator/internal/install"
)

// podSecurityFieldOwner manages the Pod Security labels the policy's
// psa.enabled puts on the operator's namespace. Setup, under the chart's
// psa.enabled, writes the same labels as its own manager: the two share
// them, and neither's change of mind removes the other's.
const podSecurityFieldOwner = "gpu-operator-psa"

// The namespace is labelled through a Role in it: a request for the
// namespace object is authorised in the namespace it names, so the grant
// covers that one namespace alone.
// +kubebuilder:rbac:groups="",namespace=gpu-operator,resources=namespaces,verbs=get;patch

// podSecurityMemo remembers the policy generation whose psa.enabled the
// namespace was last labelled for: one write per generation and operator
// start, not one per reconcile (they come every second in a rollout).
type podSecurityMemo struct {
	mu  sync.Mutex
	uid types.UID
	gen int64
}

// labelPodSecurity labels the operator's namespace for privileged pods
// when the policy's psa.enabled asks, as NVIDIA's operator does (v26.7.0
// controllers/state_manager.go, setPodSecurityLabelsForNamespace:
// enforce, audit and warn = privileged; ours leaves an audit or warn
// someone else set). Once per policy generation and operator start: a
// label removed by hand comes back at the next of either, not at once.
// Turned off, the labels stay, as NVIDIA leaves them: without them the
// operands' next pods would be refused.
func (r *Reconciler) labelPodSecurity(ctx context.Context, cp *gpuv1.ClusterPolicy) error {
	if !cp.Spec.PSA.IsEnabled() {
		return nil
	}
	d := &r.podSecurity
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.uid == cp.UID && d.gen == cp.Generation {
		return nil
	}
	// Live: the cache holds no namespace, and must not start watching
	// them all for this one read.
	if err := install.LabelPodSecurity(ctx, r.liveReader(), r.Client, r.Namespace, podSecurityFieldOwner); err != nil {
		return err
	}
	d.uid, d.gen = cp.UID, cp.Generation
	return nil
}
