// Package packaging tests how the operator is shipped: the helm chart (lint,
// render, security settings, least-privilege RBAC, values schema, a server-
// side dry run of everything), the kustomize install, the OLM bundle, the
// Dockerfile and the binary it builds, and the hooks' subcommands.
package packaging
