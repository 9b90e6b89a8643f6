package node

import (
	"context"
	"fmt"
	"sync"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/gpu-operator/gpu-operator/internal/gating"
	"github.com/gpu-operator/gpu-operator/internal/pluginconfig"
)

// pluginConfigs keeps the device plugin's ConfigMap as last read, so that
// each node's decision does not parse every file again.
type pluginConfigs struct {
	mu      sync.Mutex
	uid     types.UID
	version string
	parsed  map[string]string
	mps     map[string]bool
}

// read returns each configuration of the ConfigMap with why the operator
// cannot run it ("" when it can), and those that share GPUs with MPS.
func (p *pluginConfigs) read(cm *corev1.ConfigMap) (map[string]string, map[string]bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if cm.UID == p.uid && cm.ResourceVersion == p.version {
		return p.parsed, p.mps
	}
	out, mps := map[string]string{}, map[string]bool{}
	for name, data := range cm.Data {
		c, err := pluginconfig.Parse(data)
		switch {
		case err != nil:
			out[name] = err.Error()
		default:
			out[name] = c.Unsupported()
			mps[name] = c.MPS()
		}
	}
	for name := range cm.BinaryData {
		out[name] = "a binary entry is no configuration file"
	}
	p.uid, p.version, p.parsed, p.mps = cm.UID, cm.ResourceVersion, out, mps
	return out, mps
}

// +kubebuilder:rbac:groups="",resources=pods,verbs=list

// gpuPodsOn counts the pods on a node that hold GPUs the device plugin
// allocated (an nvidia.com/ resource), listed live: only a node whose
// configuration is to change asks.
func (r *Reconciler) gpuPodsOn(ctx context.Context, node string) (int, error) {
	list := &corev1.PodList{}
	if err := r.Client.List(ctx, list, client.MatchingFieldsSelector{Selector: fields.OneTermEqualSelector("spec.nodeName", node)}); err != nil {
		return 0, fmt.Errorf("listing the pods of node %s: %w", node, err)
	}
	n := 0
	for i := range list.Items {
		p := &list.Items[i]
		if p.Status.Phase != corev1.PodSucceeded && p.Status.Phase != corev1.PodFailed && gating.RequestsNVIDIAResource(p) {
			n++
		}
	}
	return n, nil
}
