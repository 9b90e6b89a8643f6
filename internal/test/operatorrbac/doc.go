// Package operatorrbac reads the operator's own RBAC as the installs ship
// it: config/rbac/role.yaml, generated from the controllers' markers.
package operatorrbac
