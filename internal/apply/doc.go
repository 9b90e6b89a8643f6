// Package apply writes operator objects with server-side apply under one
// field owner, skips objects already as desired (so a reconcile that changes
// nothing sends no request), and prunes objects no longer rendered.
package apply
