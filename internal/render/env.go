package render

import (
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"

	gpuv1 "github.com/gpu-operator/gpu-operator/api/v1"
)

// Env merges the operator's env with the user's: a user variable replaces
// the operator's of the same name. The result is sorted by name so that the
// pod template, and so its hash, never depends on order.
func Env(ours []corev1.EnvVar, user []gpuv1.EnvVar) []corev1.EnvVar {
	byName := make(map[string]corev1.EnvVar, len(ours)+len(user))
	for _, e := range ours {
		byName[e.Name] = e
	}
	for _, e := range user {
		byName[e.Name] = e.Core()
	}
	env := make([]corev1.EnvVar, 0, len(byName))
	for _, e := range byName {
		env = append(env, e)
	}
	slices.SortFunc(env, func(a, b corev1.EnvVar) int { return strings.Compare(a.Name, b.Name) })
	return env
}

// FieldEnv is a variable set from a field of the pod, such as
// spec.nodeName.
func FieldEnv(name, path string) corev1.EnvVar {
	return corev1.EnvVar{Name: name, ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: path}}}
}
