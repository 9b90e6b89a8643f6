package v1

import "regexp"

// The pieces of PodSelectorPattern, as labels.Parse reads a selector.
const (
	// selectorName is a label name, and a non-empty label value.
	selectorName = `[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?`
	// selectorPrefix is a DNS subdomain of at most four labels, the first
	// shorter by two, so that it never exceeds 253 characters.
	selectorPrefix = `[a-z0-9]([-a-z0-9]{0,59}[a-z0-9])?([.][a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?){0,3}`
	selectorKey    = `(` + selectorPrefix + `/)?` + selectorName
	selectorValue  = `(` + selectorName + `)?`
	selectorSet    = `[(] *` + selectorName + `( *, *` + selectorName + `)* *[)]`
	selectorReq    = `(!` + selectorKey + `|` + selectorKey + `( *(=|==|!=) *` + selectorValue + `| +(in|notin) *` + selectorSet + `)?)`
)

// PodSelectorPattern is the pattern the CRD holds every PodSelector to (its
// XValidation rule spells it out; a test keeps the two equal).
const PodSelectorPattern = `^ *` + selectorReq + `( *, *` + selectorReq + `)* *$`

var podSelectorRE = regexp.MustCompile(PodSelectorPattern)

// Valid reports whether the selector is empty or matches
// PodSelectorPattern, as the API server checks it.
func (s PodSelector) Valid() bool { return s == "" || podSelectorRE.MatchString(string(s)) }
