// Package restconfig holds how the operator's own client-go clients talk to
// the API server, apart from the manager's client, which controller-runtime
// configures.
package restconfig
