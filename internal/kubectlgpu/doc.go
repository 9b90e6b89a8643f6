// Package kubectlgpu is kubectl gpu, the GPU operator's kubectl plugin
// (cmd/kubectl-gpu): status summarises the fleet, why NODE explains one
// node with the operator's own judgement, made again here and read-only
// (internal/explain). It takes kubectl's flags (k8s.io/cli-runtime:
// kubeconfig, context, cluster, user, -n for the operator's namespace),
// and -o json.
package kubectlgpu
