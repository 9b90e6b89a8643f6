// Package eventtrail writes the operator's events: one Event per object,
// reason and type, whose message is the trail of its latest steps.
package eventtrail
