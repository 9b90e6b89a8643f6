// Package operatorrbac reads the operator's own RBAC as the installs ship
// it: config/rbac/role.yaml, generated from the controllers' markers. The
// tests read it, and hack/bundle turns it into the CSV's permissions.
package operatorrbac
