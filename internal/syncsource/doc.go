// Package syncsource turns an informer the operator runs itself (one that
// stores summaries rather than the API's objects, such as operand pods or
// ResourceSlices) into a controller-runtime source whose controller starts
// its workers only once the informer has listed.
package syncsource
