// Package registry declares the state graph: every state, its scope, its
// prerequisites and its operand, in one table. Adding a state means adding
// its package and one line here.
package registry
