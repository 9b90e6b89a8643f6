// Command bundle writes the OLM bundle (bundle/) from the project's one set
// of sources: the generated CRDs and RBAC, the manager Deployment, the
// default sample and the VERSION file. `make bundle` runs it; `make verify`
// fails when bundle/ differs from what it writes.
package main
