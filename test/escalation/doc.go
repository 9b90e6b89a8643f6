// Package escalation checks, against a real API server, that an operand's
// token taken from a GPU node is refused what its component never does:
// each test impersonates the operand's ServiceAccount, with the pod and
// node a projected token names, under the RBAC and admission policies the
// operator renders (issue 56).
package escalation
