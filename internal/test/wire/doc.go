// Package wire tells tests what an informer asks the API server for: a
// fake server on 127.0.0.1 records the Accept header of its first request.
package wire
