// Package timers holds every wait the operator's machines make, as
// configuration: production defaults, flags to change them, and the checks
// that keep them coherent. Tests and the simulated cluster run with short
// ones, so that they wait on facts rather than on the clock.
package timers
