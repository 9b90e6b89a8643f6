// Package coalesce enqueues reconcile requests a moment after the event
// that calls for them, so that a burst of events (a rollout changes
// thousands of pods and node labels within seconds) costs one reconcile of
// a fleet-wide key, not one per event.
package coalesce
