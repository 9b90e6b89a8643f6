package maintenance

import (
	"fmt"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	gpuv1 "github.com/gpu-operator/gpu-operator/api/v1"
	gpuv1alpha1 "github.com/gpu-operator/gpu-operator/api/v1alpha1"
	"github.com/gpu-operator/gpu-operator/internal/arbiter"
)

// shape is a fleet the exhaustive check explores: its size, the faults and
// changes it may meet, and what it has besides one pool of nodes.
type shape struct {
	nodes, faults, modeChanges uint8
	// cordons: people cordon nodes (a fault) and uncordon them in the end.
	cordons bool
	// flaps: a node's labels flap (node.unlabelled, a fault).
	flaps bool
	// dynamic: a person turns the DRA driver's DynamicMIG on, then off.
	dynamic bool
	// pools: the fleet is two driver pools of NVIDIADrivers. The pair (a
	// and b) has upgrade settings of its own, in a percentage
	// (maxUnavailable 50%, maxParallelUpgrades unlimited); the single
	// (c) has the ClusterPolicy's. The nodes have waited for their starts
	// for different times, the last the longest, against their names'
	// order.
	pools bool
	// moves: with pools, a person moves a node to the other pool once.
	moves bool
	// domains: with pools, one NVLink domain spans both pools (a and c,
	// rack-1; b is rack-2), capped at one domain out of service.
	domains bool
}

// parseShape reads nodes:faults[:mode changes][/cordons+flaps+dynamic+pools+domains+moves].
func parseShape(s string) (shape, error) {
	var sh shape
	counts, features, _ := strings.Cut(s, "/")
	parts := strings.Split(counts, ":")
	var err error
	switch len(parts) {
	case 2:
		_, err = fmt.Sscanf(counts, "%d:%d", &sh.nodes, &sh.faults)
	case 3:
		_, err = fmt.Sscanf(counts, "%d:%d:%d", &sh.nodes, &sh.faults, &sh.modeChanges)
	default:
		err = fmt.Errorf("not nodes:faults[:mode changes]")
	}
	if err != nil || sh.nodes < 1 || sh.nodes > fleetSize {
		return sh, fmt.Errorf("%q is not nodes:faults[:mode changes][/cordons+flaps+dynamic+pools+domains+moves] with 1 to %d nodes", s, fleetSize)
	}
	for f := range strings.SplitSeq(features, "+") {
		switch f {
		case "":
		case "cordons":
			sh.cordons = true
		case "pools":
			sh.pools = true
		case "domains":
			sh.domains = true
		case "moves":
			sh.moves = true
		case "flaps":
			sh.flaps = true
		case "dynamic":
			sh.dynamic = true
		default:
			return sh, fmt.Errorf("%q: no fleet feature %q (cordons, flaps, dynamic, pools, domains, moves)", s, f)
		}
	}
	if (sh.pools || sh.domains || sh.moves) && (sh.nodes != fleetSize || !sh.pools) {
		return sh, fmt.Errorf("%q: pools, domains and moves are a fleet of %d nodes in two pools", s, fleetSize)
	}
	return sh, nil
}

func (sh shape) String() string {
	s := fmt.Sprintf("%d nodes, %d faults, %d mode changes", sh.nodes, sh.faults, sh.modeChanges)
	if sh.cordons {
		s += ", people's cordons"
	}
	if sh.flaps {
		s += ", label flaps"
	}
	if sh.dynamic {
		s += ", DynamicMIG on and off"
	}
	if sh.pools {
		s += ", two pools"
	}
	if sh.domains {
		s += ", NVLink domains across them"
	}
	if sh.moves {
		s += ", a node moved between them"
	}
	return s
}

// poolLabel selects a node's NVIDIADriver in a fleet with pools.
const poolLabel = "example.com/pool"

// home is the driver pool node i starts in: "" where the fleet has one.
func (sh shape) home(i int) string {
	if !sh.pools {
		return ""
	}
	if i == 2 {
		return "single"
	}
	return "pair"
}

// now is the driver pool node i is in now: its home, or the other one
// once a person moved it.
func (sh shape) now(n *node, i int) string { return sh.named(i, 1+uint8(count(n.moved))) }

// named is node i's pool of a kept index: 1 its home, 2 the other.
func (sh shape) named(i int, kept uint8) string {
	home := sh.home(i)
	if kept != 2 || home == "" {
		return home
	}
	return map[string]string{"pair": "single", "single": "pair"}[home]
}

// pool is the driver pool node i counts in: the one its hold was taken
// under while an operation holds it, else the one it is in now (issue 52,
// finding 6: a node keeps the pool it was admitted under).
func (sh shape) pool(n *node, i int) string {
	if n.kept != 0 {
		return sh.named(i, n.kept)
	}
	return sh.now(n, i)
}

// domain is node i's NVLink domain: "" where the fleet has none.
func (sh shape) domain(i int) string {
	if !sh.domains {
		return ""
	}
	if i == 1 {
		return "rack-2"
	}
	return "rack-1"
}

// waited is how long before the model's now node i's operations entered
// their states: the same for every node in a fleet of one pool (the
// arbiter serves them by name), the last node the longest in one with
// pools.
func (sh shape) waited(i int) int {
	if !sh.pools {
		return 0
	}
	return int(sh.nodes) - i
}

// drivers are the NVIDIADrivers of a fleet with pools, and the policy's
// settings they need.
func (sh shape) drivers(cp *gpuv1.ClusterPolicy) []gpuv1alpha1.NVIDIADriver {
	if !sh.pools {
		return nil
	}
	cp.Spec.Driver.UseNvidiaDriverCRD = ptr.To(true)
	if sh.domains {
		cp.Spec.Operator.Maintenance.MaxUnavailableNVLinkDomains = ptr.To(intstr.FromInt32(1))
	}
	half := intstr.FromString("50%")
	pair := gpuv1alpha1.NVIDIADriver{ObjectMeta: metav1.ObjectMeta{Name: "pair"}, Spec: gpuv1alpha1.NVIDIADriverSpec{
		DriverType: "gpu", Version: string(cp.Spec.Driver.Version), NodeSelector: gpuv1.Labels{poolLabel: "pair"},
		UpgradePolicy: &gpuv1.DriverUpgradePolicySpec{AutoUpgrade: ptr.To(true), MaxParallelUpgrades: ptr.To(int32(0)),
			MaxUnavailable: &half}}}
	single := gpuv1alpha1.NVIDIADriver{ObjectMeta: metav1.ObjectMeta{Name: "single"}, Spec: gpuv1alpha1.NVIDIADriverSpec{
		DriverType: "gpu", Version: string(cp.Spec.Driver.Version), NodeSelector: gpuv1.Labels{poolLabel: "single"}}}
	return []gpuv1alpha1.NVIDIADriver{pair, single}
}

// scope is where the operation's own share on node i counts: the upgrade's
// and the switch's in the node's pool, the others' over the fleet.
func (sh shape) scope(op arbiter.Operation, n *node, i int) string {
	if op == arbiter.DriverUpgrade || op == arbiter.ModeSwitch {
		return sh.pool(n, i)
	}
	return ""
}

// share is the limit of the operation's own share in node i's scope: 1,
// or 0 for none (the pair's maxParallelUpgrades 0, which its upgrades and
// switches share).
func (sh shape) share(op arbiter.Operation, n *node, i int) int {
	if (op == arbiter.DriverUpgrade || op == arbiter.ModeSwitch) && sh.pool(n, i) == "pair" {
		return 0
	}
	return 1
}

// maxUnavailable is the availability budget of a pool of size nodes: the
// pair's 50%, rounded up; 1, the ClusterPolicy's, for the others.
func (sh shape) maxUnavailable(pool string, size int) int {
	if pool == "pair" {
		return (size + 1) / 2
	}
	return 1
}
