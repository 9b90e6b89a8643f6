package clusterpolicy

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"maps"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/gpu-operator/gpu-operator/internal/state"
)

// readModuleParams reads the files of each pool's kernelModuleConfig
// ConfigMap. A pool whose ConfigMap does not exist, or holds a key the
// driver container does not read, is left out, with why: its DaemonSets
// stay as they are, for a driver started without the parameters asked for
// (GB200's coherent memory mode, for one) would be a wrong driver, and the
// other pools and states go on.
func (r *Reconciler) readModuleParams(ctx context.Context, pools []state.DriverPool) ([]state.DriverPool, map[string]error, error) {
	failed := map[string]error{}
	var out []state.DriverPool
	for i := range pools {
		kmc := pools[i].Driver.KernelModuleConfig
		if kmc == nil || kmc.Name == "" {
			out = append(out, pools[i])
			continue
		}
		cm := &corev1.ConfigMap{}
		if err := r.Client.Get(ctx, client.ObjectKey{Namespace: r.Namespace, Name: kmc.Name}, cm); err != nil {
			if apierrors.IsNotFound(err) {
				failed[pools[i].Name] = fmt.Errorf("driver pool %s: kernelModuleConfig names ConfigMap %s, which does not exist in namespace %s: "+
					"create it (keys %s) or unset kernelModuleConfig; the pool's drivers stay as they are",
					pools[i].Name, kmc.Name, r.Namespace, strings.Join(state.ModuleParamFiles, ", "))
				continue
			}
			return nil, nil, fmt.Errorf("reading ConfigMap %s of driver pool %s's kernelModuleConfig: %w", kmc.Name, pools[i].Name, err)
		}
		if unknown := unknownModuleParamFiles(cm); len(unknown) > 0 {
			failed[pools[i].Name] = fmt.Errorf("driver pool %s: kernelModuleConfig ConfigMap %s has keys %s, which the driver container does not "+
				"read: each key is mounted into the privileged driver container under /drivers, beside the driver's sources; keep only %s; "+
				"the pool's drivers stay as they are",
				pools[i].Name, kmc.Name, strings.Join(unknown, ", "), strings.Join(state.ModuleParamFiles, ", "))
			continue
		}
		if file, n, line, why := badModuleParams(cm); n > 0 {
			failed[pools[i].Name] = fmt.Errorf("driver pool %s: kernelModuleConfig ConfigMap %s, %s line %d %q: %s; "+
				"the pool's drivers stay as they are", pools[i].Name, kmc.Name, file, n, line, why)
			continue
		}
		params := &state.ModuleParams{ConfigMap: kmc.Name, Files: slices.Sorted(maps.Keys(cm.Data))}
		sum := sha256.New()
		for _, f := range params.Files {
			fmt.Fprintf(sum, "%s\x00%s\x00", f, cm.Data[f])
		}
		params.Digest = hex.EncodeToString(sum.Sum(nil)[:8])
		pools[i].ModuleParams = params
		out = append(out, pools[i])
	}
	return out, failed, nil
}

// unknownModuleParamFiles are the keys of a kernelModuleConfig ConfigMap
// the driver container does not read, sorted.
func unknownModuleParamFiles(cm *corev1.ConfigMap) []string {
	var unknown []string
	for _, k := range slices.Sorted(maps.Keys(cm.Data)) {
		if !slices.Contains(state.ModuleParamFiles, k) {
			unknown = append(unknown, k)
		}
	}
	for _, k := range slices.Sorted(maps.Keys(cm.BinaryData)) {
		unknown = append(unknown, k+" (binaryData)")
	}
	return unknown
}

// badModuleParams returns the first file and line of a kernelModuleConfig
// ConfigMap that is not one module parameter (state.BadModuleParamLine).
func badModuleParams(cm *corev1.ConfigMap) (file string, n int, line, why string) {
	for _, f := range slices.Sorted(maps.Keys(cm.Data)) {
		if n, line, why := state.BadModuleParamLine(f, cm.Data[f]); n > 0 {
			return f, n, line, why
		}
	}
	return "", 0, "", ""
}
