package clusterpolicy

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"

	appsv1 "k8s.io/api/apps/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	gpuv1 "github.com/gpu-operator/gpu-operator/api/v1"
	"github.com/gpu-operator/gpu-operator/internal/render"
	"github.com/gpu-operator/gpu-operator/internal/state"
	"github.com/gpu-operator/gpu-operator/internal/state/dcgmexporter"
)

// dcgmMetrics reads dcgmExporter.config's metrics list: its digest, which
// restarts the exporters on a new content, or why it cannot be used. An
// exporter started on a ConfigMap that does not exist, or without the
// key, would never start: the exporters then stay as they are, and the
// problem says what to fix.
func (r *Reconciler) dcgmMetrics(ctx context.Context, cp *gpuv1.ClusterPolicy) (digest string, problem error, err error) {
	name := cp.Spec.DCGMExporter.Config.Named()
	if name == "" || !cp.Spec.DCGMExporter.IsEnabled() {
		return "", nil, nil
	}
	cm, err := r.readConfigMap(ctx, r.Client, name)
	switch {
	case err != nil:
		return "", nil, fmt.Errorf("reading ConfigMap %s of dcgmExporter.config: %w", name, err)
	case cm == nil:
		return "", fmt.Errorf("dcgmExporter.config.name names ConfigMap %s, which does not exist in namespace %s: create it with key %s "+
			"(dcgm-exporter's metrics list) or unset dcgmExporter.config; the exporters stay as they are", name, r.Namespace, dcgmexporter.MetricsKey), nil
	}
	data, ok := cm.Data[dcgmexporter.MetricsKey]
	if !ok {
		return "", fmt.Errorf("dcgmExporter.config.name names ConfigMap %s, which has no key %s: add dcgm-exporter's metrics list "+
			"under that key; the exporters stay as they are", name, dcgmexporter.MetricsKey), nil
	}
	sum := sha256.Sum256([]byte(data))
	return hex.EncodeToString(sum[:8]), nil, nil
}

// isExporterDaemonSet reports whether an object is a DaemonSet of
// dcgm-exporter.
func isExporterDaemonSet(o client.Object) bool {
	_, ok := o.(*appsv1.DaemonSet)
	return ok && o.GetLabels()[render.LabelState] == string(state.DCGMExporter)
}
