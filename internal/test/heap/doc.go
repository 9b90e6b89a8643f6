// Package heap measures what stays on the heap, for benchmarks that print
// the memory a cache keeps per object.
package heap
