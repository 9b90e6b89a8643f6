// Command kubectl-gpu is the kubectl plugin of the GPU operator
// (internal/kubectlgpu): kubectl gpu status, kubectl gpu why NODE.
package main
