// Package envtest starts a real kube-apiserver and etcd for tests, with the
// project's CRDs installed from config/crd.
package envtest
