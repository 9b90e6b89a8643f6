// Package restconfig holds how the operator talks to the API server
// beyond controller-runtime's defaults: uncompressed, for every client of
// the operator's, and as protobuf, for its own client-go informers.
package restconfig
