// Package crdschema reads the generated ClusterPolicy CRD in tests, so that
// Go code and the CRD's validation rules can be checked against each other.
package crdschema
