// Package scheme builds the one scheme the operator, its kubectl plugin
// and its tests read and write objects with.
package scheme
