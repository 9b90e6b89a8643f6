// Package chaos is `make test-chaos`: faults injected into a simulated cluster (hack/sim) under the operator, then invariants checked on every version the API server stored; the run is behind the chaos build tag, the checker's own tests are not.
package chaos
