package clusterpolicy

import (
	"context"
	"fmt"
	"slices"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	gpuv1 "github.com/gpu-operator/gpu-operator/api/v1"
	"github.com/gpu-operator/gpu-operator/internal/pluginconfig"
	"github.com/gpu-operator/gpu-operator/internal/state"
	"github.com/gpu-operator/gpu-operator/internal/state/deviceplugin"
)

// pluginConfigs are devicePlugin.config's files as the pods run them.
type pluginConfigs struct {
	// digests and mps are of the configurations nodes can run, by name.
	digests map[string]string
	mps     map[string]bool
	// validated is the operator's ConfigMap of those configurations,
	// which the pods mount; nil when the policy names no ConfigMap.
	validated *corev1.ConfigMap
}

// devicePluginConfigs judges devicePlugin.config's files against the last
// good copies the validated ConfigMap keeps. Only files the device plugin
// starts with reach the pods: a file that an edit broke, or that went with
// its key or its ConfigMap, keeps its last good copy while a node runs it,
// so the pods that read it keep their template and nothing restarts; a
// new valid content rolls them.
func (r *Reconciler) devicePluginConfigs(ctx context.Context, cp *gpuv1.ClusterPolicy, inUse []state.Variant) (pluginConfigs, error) {
	cfg := cp.Spec.DevicePlugin.Config
	if cfg == nil || cfg.Name == "" {
		return pluginConfigs{}, nil
	}
	user, err := r.readConfigMap(ctx, r.Client, cfg.Name)
	if err != nil {
		return pluginConfigs{}, fmt.Errorf("reading ConfigMap %s of devicePlugin.config: %w", cfg.Name, err)
	}
	copies, err := r.readConfigMap(ctx, r.Client, pluginconfig.ValidatedConfigMap)
	if err != nil {
		return pluginConfigs{}, fmt.Errorf("reading ConfigMap %s, the validated device plugin configurations: %w", pluginconfig.ValidatedConfigMap, err)
	}
	mixed := cp.Spec.MIG.StrategyOrDefault() == gpuv1.MIGStrategyMixed
	files := r.configs.Judge(user, copies, mixed)
	if len(files.KeptNames) > 0 {
		// A copy is what nodes will run: read it as stored, not as a
		// cache that may not have the last one written yet, whose older
		// copy would roll the pods back to it.
		if copies, err = r.readConfigMap(ctx, r.liveReader(), pluginconfig.ValidatedConfigMap); err != nil {
			return pluginConfigs{}, fmt.Errorf("reading ConfigMap %s, the validated device plugin configurations: %w", pluginconfig.ValidatedConfigMap, err)
		}
		files = r.configs.Judge(user, copies, mixed)
	}
	running := map[string]bool{cfg.Default: true}
	for _, v := range inUse {
		running[v.DevicePluginConfig] = true
	}
	validated := files.Validated(func(name string) bool { return running[name] })
	out := pluginConfigs{digests: make(map[string]string, len(validated)), mps: map[string]bool{},
		validated: deviceplugin.ValidatedConfigs(cp, r.Namespace, validated)}
	for name := range validated {
		out.digests[name] = files.Run[name].Digest()
		out.mps[name] = files.Run[name].Config.MPS()
	}
	return out, nil
}

// liveReader reads objects as stored.
func (r *Reconciler) liveReader() client.Reader {
	if r.Applier.Live != nil {
		return r.Applier.Live
	}
	return r.Client
}

// readConfigMap reads a ConfigMap of the operator's namespace; nil when it
// does not exist.
func (r *Reconciler) readConfigMap(ctx context.Context, reader client.Reader, name string) (*corev1.ConfigMap, error) {
	cm := &corev1.ConfigMap{}
	switch err := reader.Get(ctx, client.ObjectKey{Namespace: r.Namespace, Name: name}, cm); {
	case apierrors.IsNotFound(err):
		return nil, nil
	case err != nil:
		return nil, err
	}
	return cm, nil
}

// isValidatedConfigs reports whether an object is the validated ConfigMap.
func isValidatedConfigs(o client.Object) bool {
	_, ok := o.(*corev1.ConfigMap)
	return ok && o.GetName() == pluginconfig.ValidatedConfigMap
}

// readsValidatedConfigs reports whether an object's pods mount the
// validated ConfigMap.
func readsValidatedConfigs(o client.Object) bool {
	ds, ok := o.(*appsv1.DaemonSet)
	if !ok {
		return false
	}
	return slices.ContainsFunc(ds.Spec.Template.Spec.Volumes, func(v corev1.Volume) bool {
		return v.ConfigMap != nil && v.ConfigMap.Name == pluginconfig.ValidatedConfigMap
	})
}
