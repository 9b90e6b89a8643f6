// Package arbiter is where the operations that take a GPU node out of
// service meet (driver upgrades, MIG reconfigurations, repairs): one
// table says which may start or go on while another holds the node, one
// admission function and one budget type decide which may start now.
// It is pure: the maintenance controller and the exhaustive check of the
// combined machines call the same functions.
package arbiter
