package restconfig

import "k8s.io/client-go/rest"

// Uncompressed returns a copy of cfg whose requests do not ask for gzip.
// Go's HTTP transport asks for it unless told not to, and the API server
// then compresses each response and each watch stream's events, separately
// for every watcher; the client decompresses them. Between a controller
// and its API server the network is not what is short, the CPU is: the
// scheduler and the controller manager turn compression off for the same
// reason (kubernetes/kubernetes#80919), and the operator watches every
// node of the fleet, whose kubelets report their status each few minutes.
func Uncompressed(cfg *rest.Config) *rest.Config {
	out := rest.CopyConfig(cfg)
	out.DisableCompression = true
	return out
}
