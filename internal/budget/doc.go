// Package budget turns the int-or-percent values of the ClusterPolicy, such
// as driver.upgradePolicy.maxUnavailable, into node counts.
package budget
