package clusterpolicy

import (
	"context"
	"fmt"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	gpuv1 "github.com/gpu-operator/gpu-operator/api/v1"
	"github.com/gpu-operator/gpu-operator/internal/render"
	"github.com/gpu-operator/gpu-operator/internal/state"
	"github.com/gpu-operator/gpu-operator/internal/state/dcgmexporter"
)

// dcgmMetrics reads the metrics list the exporters are to run: that of
// dcgmExporter.config's ConfigMap while dcgm-exporter can read it, else the
// last good copy the operator kept (dcgmexporter.MetricsCopy), with a
// problem that says what to fix either way. With neither, list is "" and
// the exporters stay as they are: one started without a list it can read
// would never start.
func (r *Reconciler) dcgmMetrics(ctx context.Context, cp *gpuv1.ClusterPolicy) (list string, problem error, err error) {
	name := cp.Spec.DCGMExporter.Config.Named()
	if name == "" || !cp.Spec.DCGMExporter.IsEnabled() {
		return "", nil, nil
	}
	cm, err := r.readConfigMap(ctx, r.Client, name)
	if err != nil {
		return "", nil, fmt.Errorf("reading ConfigMap %s of dcgmExporter.config: %w", name, err)
	}
	data, ok := "", false
	switch {
	case cm == nil:
		problem = fmt.Errorf("dcgmExporter.config.name names ConfigMap %s, which does not exist in namespace %s: create it with key %s "+
			"(dcgm-exporter's metrics list) or unset dcgmExporter.config", name, r.Namespace, dcgmexporter.MetricsKey)
	default:
		if data, ok = cm.Data[dcgmexporter.MetricsKey]; !ok {
			problem = fmt.Errorf("dcgmExporter.config.name names ConfigMap %s, which has no key %s: add dcgm-exporter's metrics list "+
				"under that key", name, dcgmexporter.MetricsKey)
		} else if bad := dcgmexporter.CheckMetrics(data); bad != nil {
			problem = fmt.Errorf("dcgmExporter.config.name names ConfigMap %s, whose %s dcgm-exporter would refuse at start: %w",
				name, dcgmexporter.MetricsKey, bad)
		}
	}
	if problem == nil {
		return data, nil, nil
	}
	kept, err := r.readConfigMap(ctx, r.Client, dcgmexporter.MetricsCopy)
	if err != nil {
		return "", nil, fmt.Errorf("reading ConfigMap %s: %w", dcgmexporter.MetricsCopy, err)
	}
	if last := keptMetrics(kept); last != "" {
		return last, fmt.Errorf("%w; the exporters run its last good list, kept in ConfigMap %s", problem, dcgmexporter.MetricsCopy), nil
	}
	return "", fmt.Errorf("%w; the exporters stay as they are", problem), nil
}

// keptMetrics is the list a copy holds, if it is one the exporter can
// read: a copy edited by someone else into one it cannot is no last good
// list.
func keptMetrics(cm *corev1.ConfigMap) string {
	if cm == nil {
		return ""
	}
	data := cm.Data[dcgmexporter.MetricsKey]
	if dcgmexporter.CheckMetrics(data) != nil {
		return ""
	}
	return data
}

// isMetricsCopy reports whether an object is the operator's copy of the
// exporters' metrics list.
func isMetricsCopy(o client.Object) bool {
	_, ok := o.(*corev1.ConfigMap)
	return ok && o.GetName() == dcgmexporter.MetricsCopy
}

// isExporterDaemonSet reports whether an object is a DaemonSet of
// dcgm-exporter.
func isExporterDaemonSet(o client.Object) bool {
	_, ok := o.(*appsv1.DaemonSet)
	return ok && o.GetLabels()[render.LabelState] == string(state.DCGMExporter)
}
