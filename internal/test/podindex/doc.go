// Package podindex builds operand pod indexes over a fixed list of pods,
// for unit tests of the controllers that read one without an API server.
package podindex
