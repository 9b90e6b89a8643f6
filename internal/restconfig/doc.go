// Package restconfig holds how the operator talks to the API server
// beyond controller-runtime's defaults: uncompressed, for the manager and
// every client built from its config, and as protobuf, for its own
// client-go informers.
package restconfig
