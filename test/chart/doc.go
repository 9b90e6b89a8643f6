// Package chart tests the helm chart: it lints, renders for the default
// values and for a values file that sets everything, holds the security
// settings and least-privilege RBAC the operator promises, rejects bad
// values, and every rendered object passes a server-side dry run.
package chart
