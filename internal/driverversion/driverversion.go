package driverversion

import (
	"fmt"
	"regexp"
	"strings"
)

// Pattern is the grammar of driver.version: a driver version, a branch
// (precompiled images only, which the CRD's rules on the driver section
// hold), or a digest. The CRD's validation rule uses the same expression;
// a test keeps the two identical.
const Pattern = `^([0-9]+([.][0-9]+){0,2}|sha256:[a-f0-9]{64})$`

var pattern = regexp.MustCompile(Pattern)

const digestPrefix = "sha256:"

// Version is a parsed driver.version.
type Version struct {
	raw     string
	numbers []string // dotted components as written, leading zeros kept
}

// Parse parses a driver version such as 535.154.05, a branch such as 580,
// or a digest written sha256:<64 hex digits>.
func Parse(s string) (Version, error) {
	if !pattern.MatchString(s) {
		return Version{}, fmt.Errorf("driver version %q: want dotted numbers such as 535.154.05, a branch such as 580, or sha256:<64 lower case hex digits>", s)
	}
	v := Version{raw: s}
	if !v.IsDigest() {
		v.numbers = strings.Split(s, ".")
	}
	return v, nil
}

// String returns the version exactly as written.
func (v Version) String() string { return v.raw }

// IsDigest reports whether the version is an image digest rather than a
// version number; a digest is used as image@sha256:..., with no OS suffix.
func (v Version) IsDigest() bool { return strings.HasPrefix(v.raw, digestPrefix) }

// Branch returns the major version, such as "535", or "" for a digest.
func (v Version) Branch() string {
	if v.IsDigest() {
		return ""
	}
	return trimZeros(v.numbers[0])
}

// Compare orders two versions numerically, component by component (a
// missing component counts as 0). Digests have no order: they compare equal
// to each other when identical and sort after every version number.
func (v Version) Compare(o Version) int {
	switch {
	case v.IsDigest() || o.IsDigest():
		return compareDigests(v, o)
	}
	for i := range max(len(v.numbers), len(o.numbers)) {
		if c := compareNumbers(component(v.numbers, i), component(o.numbers, i)); c != 0 {
			return c
		}
	}
	return 0
}

func compareDigests(v, o Version) int {
	switch {
	case v.IsDigest() && o.IsDigest():
		return strings.Compare(v.raw, o.raw)
	case v.IsDigest():
		return 1
	default:
		return -1
	}
}

func component(numbers []string, i int) string {
	if i < len(numbers) {
		return numbers[i]
	}
	return "0"
}

// compareNumbers compares decimal numbers of any length without converting
// them, so that no input accepted by the CRD can overflow.
func compareNumbers(a, b string) int {
	a, b = trimZeros(a), trimZeros(b)
	if len(a) != len(b) {
		if len(a) < len(b) {
			return -1
		}
		return 1
	}
	return strings.Compare(a, b)
}

func trimZeros(s string) string {
	t := strings.TrimLeft(s, "0")
	if t == "" {
		return "0"
	}
	return t
}
