// Package version holds the operator's version, set at build time.
package version
