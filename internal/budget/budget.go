package budget

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"

	"k8s.io/apimachinery/pkg/util/intstr"
)

// Pattern is the grammar of an int-or-percent written as a string: a count
// ("1", as the NVIDIA GPU Operator's chart writes it) or a percentage from
// 1% to 100%. The CRD's rules use the same expression; a test keeps them
// identical.
const Pattern = `^([1-9][0-9]{0,8}|(100|[1-9][0-9]?)%)$`

var pattern = regexp.MustCompile(Pattern)

// Nodes returns how many of total nodes the value allows: a count as is, a
// percentage of total rounded up, so that 25% of 3 nodes is 1 and a small
// pool still makes progress. The field path names the value in errors.
func Nodes(field string, v intstr.IntOrString, total int) (int, error) {
	if total < 0 {
		return 0, fmt.Errorf("%s: total node count %d is negative", field, total)
	}
	switch v.Type {
	case intstr.Int:
		if v.IntVal < 1 {
			return 0, fmt.Errorf("%s: %d is not a count of at least 1", field, v.IntVal)
		}
		return int(v.IntVal), nil
	case intstr.String:
		if !pattern.MatchString(v.StrVal) {
			return 0, fmt.Errorf("%s: %q is not a count of at least 1 nor a percentage from 1%% to 100%%", field, v.StrVal)
		}
		if !strings.HasSuffix(v.StrVal, "%") {
			n, err := strconv.Atoi(v.StrVal)
			if err != nil {
				return 0, fmt.Errorf("%s: %w", field, err)
			}
			return n, nil
		}
		n, err := intstr.GetScaledValueFromIntOrPercent(&v, total, true)
		if err != nil {
			return 0, fmt.Errorf("%s: %w", field, err)
		}
		return n, nil
	default:
		return 0, fmt.Errorf("%s: unknown int-or-string type %d", field, v.Type)
	}
}
