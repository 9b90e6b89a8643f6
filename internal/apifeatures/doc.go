// Package apifeatures reads which feature gates the API server runs with,
// where an operand's work depends on one the operator cannot turn on.
package apifeatures
