package maintenance

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	gpuv1 "github.com/gpu-operator/gpu-operator/api/v1"
	"github.com/gpu-operator/gpu-operator/internal/arbiter"
	"github.com/gpu-operator/gpu-operator/internal/draslices"
	"github.com/gpu-operator/gpu-operator/internal/driverpool"
	"github.com/gpu-operator/gpu-operator/internal/migconfig"
	"github.com/gpu-operator/gpu-operator/internal/migreconfig"
	"github.com/gpu-operator/gpu-operator/internal/state"
	"github.com/gpu-operator/gpu-operator/internal/state/migmanager"
)

// draNode is a node in allocation mode dra with 8 GPUs (GFD's count) and
// its DRA driver's state.
func draNode(driver gpuv1.StateValue) *corev1.Node {
	return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n", Labels: map[string]string{
		gpuv1.LabelAllocationMode: "dra", gpuv1.StateLabel(string(state.DRADriver)): string(driver),
		gpuv1.StateLabel(string(state.DevicePlugin)): string(gpuv1.StateDisabled), "nvidia.com/gpu.count": "8",
		gpuv1.StateLabel(string(state.GPUFeatureDiscovery)): string(gpuv1.StateReady),
	}}}
}

// publishedSlices is one complete slice generation's summary: whole GPUs,
// or MIG devices by profile cut from all 8.
func publishedSlices(whole int, mig map[string]int) *draslices.Node {
	gpus := whole
	if len(mig) > 0 {
		gpus = 8
	}
	return &draslices.Node{Slices: 1, Pools: []draslices.Pool{{Name: "n", Generation: 2, Have: 1, Want: 1}}, GPUs: gpus,
		WholeGPUs: whole, MIGDevices: mig}
}

// A MIG reconfiguration of a node in allocation mode dra is validated by
// the DRA driver: once its state is ready again (a plugin started since
// the apply published complete slices), its slices must name the
// configuration's MIG devices by profile, and its whole GPUs.
func TestMIGValidationOnADRANode(t *testing.T) {
	file, err := migconfig.Parse(migmanager.DefaultConfig)
	NewWithT(t).Expect(err).NotTo(HaveOccurred())
	oneG := map[string]int{"1g.18gb": 56}
	for name, tc := range map[string]struct {
		driver   gpuv1.StateValue
		config   string
		slices   SliceReader
		want     migreconfig.Advertised
		mismatch string
	}{
		"the plugin not back yet":         {driver: gpuv1.StatePending, config: "all-1g.18gb", slices: slicesSay{node: publishedSlices(0, oneG)}, want: migreconfig.Unknown},
		"the plugin failed":               {driver: gpuv1.StateFailed, config: "all-1g.18gb", slices: slicesSay{node: publishedSlices(0, oneG)}, want: migreconfig.Unknown},
		"opted out of the DRA driver":     {driver: gpuv1.StateDisabled, config: "all-1g.18gb", want: migreconfig.Matches},
		"the MIG devices published":       {driver: gpuv1.StateReady, config: "all-1g.18gb", slices: slicesSay{node: publishedSlices(0, oneG)}, want: migreconfig.Matches},
		"whole GPUs back":                 {driver: gpuv1.StateReady, config: "all-disabled", slices: slicesSay{node: publishedSlices(8, nil)}, want: migreconfig.Matches},
		"success reported, no MIG device": {driver: gpuv1.StateReady, config: "all-1g.18gb", slices: slicesSay{node: publishedSlices(8, nil)}, want: migreconfig.Differs, mismatch: "no MIG device of profile 1g.18gb (56 expected)"},
		"the old layout left":             {driver: gpuv1.StateReady, config: "all-disabled", slices: slicesSay{node: publishedSlices(0, oneG)}, want: migreconfig.Differs, mismatch: "1g.18gb, which the configuration does not make"},
		"a GPU short of its MIG devices":  {driver: gpuv1.StateReady, config: "all-1g.18gb", slices: slicesSay{node: publishedSlices(0, map[string]int{"1g.18gb": 49})}, want: migreconfig.Differs, mismatch: "49 MIG devices of profile 1g.18gb, not 56"},
		"slices not listed yet":           {driver: gpuv1.StateReady, config: "all-1g.18gb", slices: slicesSay{err: errors.New("not synced")}, want: migreconfig.Unknown},
		"a generation half published":     {driver: gpuv1.StateReady, config: "all-1g.18gb", slices: slicesSay{node: &draslices.Node{Pools: []draslices.Pool{{Name: "n", Have: 1, Want: 2}}}}, want: migreconfig.Unknown},
		"the API not served":              {driver: gpuv1.StateReady, config: "all-1g.18gb", want: migreconfig.Unknown},
	} {
		t.Run(name, func(t *testing.T) {
			g := NewWithT(t)
			r := &Reconciler{Slices: tc.slices}
			got, mismatch := r.advertised(&gpuv1.ClusterPolicy{}, &observed{}, draNode(tc.driver), migConfigs{file: file},
				migreconfig.Facts{Applied: tc.config})
			g.Expect(got).To(Equal(tc.want), mismatch)
			g.Expect(mismatch).To(ContainSubstring(tc.mismatch))
		})
	}
}

// A DRA node whose slices already show the configuration takes it in
// place, with no restart; where the GPU count is not known, or the
// driver does not serve, it is applied.
func TestMIGInPlaceOnADRANode(t *testing.T) {
	g := NewWithT(t)
	file, err := migconfig.Parse(migmanager.DefaultConfig)
	g.Expect(err).NotTo(HaveOccurred())
	configs, now := migConfigs{file: file}, time.Now()
	r := &Reconciler{Slices: slicesSay{node: publishedSlices(0, map[string]int{"1g.18gb": 56})}}
	g.Expect(r.inPlace(&gpuv1.ClusterPolicy{}, &observed{}, draNode(gpuv1.StateReady), configs, "all-1g.18gb", now)).To(Equal(migreconfig.Matches))
	g.Expect(r.inPlace(&gpuv1.ClusterPolicy{}, &observed{}, draNode(gpuv1.StateReady), configs, "all-disabled", now)).To(Equal(migreconfig.Differs))
	g.Expect(r.inPlace(&gpuv1.ClusterPolicy{}, &observed{}, draNode(gpuv1.StatePending), configs, "all-1g.18gb", now)).To(Equal(migreconfig.Differs))
	gfdBack := draNode(gpuv1.StateReady)
	gfdBack.Labels[gpuv1.StateLabel(string(state.GPUFeatureDiscovery))] = string(gpuv1.StatePending)
	g.Expect(r.inPlace(&gpuv1.ClusterPolicy{}, &observed{}, gfdBack, configs, "all-1g.18gb", now)).To(Equal(migreconfig.Unknown),
		"GFD's count is awaited, as on a device-plugin node")
	uncounted := draNode(gpuv1.StateReady)
	delete(uncounted.Labels, "nvidia.com/gpu.count")
	g.Expect(r.inPlace(&gpuv1.ClusterPolicy{}, &observed{}, uncounted, configs, "all-1g.18gb", now)).To(Equal(migreconfig.Differs),
		"a GPU in MIG mode without devices publishes nothing: the count must be known")
}

// A configuration that creates MIG devices is no longer refused on a DRA
// node: the DRA driver publishes them.
func TestMIGConfigurationsApplyOnADRANode(t *testing.T) {
	g := NewWithT(t)
	file, err := migconfig.Parse(migmanager.DefaultConfig)
	g.Expect(err).NotTo(HaveOccurred())
	cp := &gpuv1.ClusterPolicy{}
	cp.Spec.MIG.Strategy = gpuv1.MIGStrategyMixed
	g.Expect(migConfigs{file: file}.refusal(cp, draNode(gpuv1.StateReady), "all-1g.18gb")).To(BeEmpty())
}

// What the DRA driver cannot serve is refused on DRA nodes, naming why,
// and applies on device-plugin nodes: GPUs in MIG mode without MIG
// devices (it publishes nothing for them), a profile that splits its GPU
// instance (it stops at start); and with DynamicMIG, the driver's own,
// mig-manager's reconfiguration leaves DRA nodes alone.
func TestMIGConfigurationsTheDRADriverCannotServe(t *testing.T) {
	g := NewWithT(t)
	file, err := migconfig.Parse(`version: v1
mig-configs:
  all-disabled:
    - devices: all
      mig-enabled: false
  all-enabled:
    - devices: all
      mig-enabled: true
      mig-devices: {}
  split:
    - devices: all
      mig-enabled: true
      mig-devices: {"1c.2g.35gb": 3}
  c-written:
    - devices: all
      mig-enabled: true
      mig-devices: {"1c.1g.18gb": 7}
`)
	g.Expect(err).NotTo(HaveOccurred())
	cp := &gpuv1.ClusterPolicy{}
	dp := draNode(gpuv1.StateReady)
	dp.Labels[gpuv1.LabelAllocationMode] = string(gpuv1.AllocationDevicePlugin)
	configs := migConfigs{file: file}
	g.Expect(configs.refusal(cp, draNode(gpuv1.StateReady), "all-enabled")).To(ContainSubstring("leaves GPUs in MIG mode without MIG devices"))
	g.Expect(configs.refusal(cp, dp, "all-enabled")).To(BeEmpty())
	g.Expect(configs.refusal(cp, draNode(gpuv1.StateReady), "split")).To(ContainSubstring("profile 1c.2g.35gb"))
	g.Expect(configs.refusal(cp, dp, "split")).To(BeEmpty())
	g.Expect(configs.refusal(cp, draNode(gpuv1.StateReady), "c-written")).To(BeEmpty(), "1c.1g.18gb is 1g.18gb")

	// With DynamicMIG the DRA driver manages MIG on DRA nodes: the
	// reconfiguration does not run there, and lets go where it stands.
	on := &pass{cp: &gpuv1.ClusterPolicy{}, dynamicMIG: true}
	on.cp.Spec.MIGManager.Enabled = ptr.To(true)
	draOne := draNode(gpuv1.StateReady)
	for _, n := range []*corev1.Node{draOne, dp} {
		n.Labels[gpuv1.DeployLabel(string(state.MIGManager))] = gpuv1.LabelTrue
		n.Labels[gpuv1.LabelGPUPresent] = gpuv1.LabelTrue
	}
	g.Expect(reconfigurations{}.runs(on, dp)).To(BeTrue())
	g.Expect(reconfigurations{}.runs(on, draOne)).To(BeFalse())
	on.dynamicMIG = false
	g.Expect(reconfigurations{}.runs(on, draOne)).To(BeTrue())
	for gates, want := range map[string]bool{"": false, "DynamicMIG": true, "AllAlpha": true, "AllAlpha,DynamicMIG=false": false} {
		spec := &gpuv1.DRADriverSpec{FeatureGates: map[string]bool{}}
		for _, gate := range strings.Split(gates, ",") {
			if name, off := strings.CutSuffix(gate, "=false"); gate != "" {
				spec.FeatureGates[name] = !off
			}
		}
		g.Expect(spec.DynamicMIG()).To(Equal(want), gates)
	}
}

// Issue 52, finding 3: DynamicMIG turned on (a GPUCluster created, or the
// DRA driver's gate) lets go of the MIG reconfigurations of DRA nodes but
// for an apply under way, which finishes: cut mid-apply, a node was left
// half partitioned. Its validation would read the layout the DRA driver's
// start destroys, and is let go.
func TestAMIGApplyOutlivesDynamicMIG(t *testing.T) {
	g := NewWithT(t)
	cp := &gpuv1.ClusterPolicy{}
	cp.Spec.MIGManager.Enabled = ptr.To(true)
	p := &pass{cp: cp, dynamicMIG: true}
	for st, runs := range map[gpuv1.MIGReconfigureState]bool{
		gpuv1.MIGEviction: false, gpuv1.MIGClientsOff: false, gpuv1.MIGApply: true, gpuv1.MIGValidation: false,
		gpuv1.MIGReconfigureRequired: false, gpuv1.MIGReconfigureFailed: false, gpuv1.MIGReconfigureDone: false,
	} {
		n := draNode(gpuv1.StatePending)
		n.Labels["feature.node.kubernetes.io/pci-10de.present"] = gpuv1.LabelTrue
		n.Labels[gpuv1.DeployLabel(string(state.MIGManager))] = gpuv1.LabelTrue
		n.Labels[gpuv1.LabelMIGReconfigureState] = string(st)
		n.Annotations = map[string]string{AnnotationMIGSince: time.Now().UTC().Format(time.RFC3339)}
		g.Expect(reconfigurations{}.runs(p, n)).To(Equal(runs), "MIG reconfiguration %s under DynamicMIG", st)
		delete(n.Labels, gpuv1.LabelAllocationMode)
		g.Expect(reconfigurations{}.runs(p, n)).To(BeTrue(), "a device-plugin node keeps mig-manager (%s)", st)
	}
}

// A MIG reconfiguration let go to the DRA driver's DynamicMIG holds no
// place in the view at once, but its taint stays until the look's forget
// removes it, a write that may conflict: until then the node counts as
// unavailable, so that no switch or upgrade of its pool takes a second
// place of maxUnavailable meanwhile. Found by the exhaustive check (2:1:1
// with DynamicMIG turned on and off).
func TestAReconfigurationLetGoCountsUntilItsMarksAreGone(t *testing.T) {
	g := NewWithT(t)
	cp := &gpuv1.ClusterPolicy{}
	cp.Spec.MIGManager.Enabled = ptr.To(true)
	n := gpuNode("a", map[string]string{
		gpuv1.LabelMIGReconfigureState:              string(gpuv1.MIGEviction),
		gpuv1.LabelAllocationMode:                   string(gpuv1.AllocationDRA),
		gpuv1.DeployLabel(string(state.MIGManager)): gpuv1.LabelTrue,
	}, map[string]string{AnnotationMIGSince: time.Now().UTC().Format(time.RFC3339)})
	p := &pass{r: &Reconciler{}, cp: cp, now: time.Now(), obs: &observed{pools: driverpool.FromPolicy(cp)},
		machines: []machine{&reconfigurations{}}, dynamicMIG: true}
	v := p.view(context.Background(), n)
	g.Expect(v.Ops[arbiter.MIGReconfiguration].Phase).To(Equal(arbiter.Idle), "let go to the DRA driver")
	g.Expect(v.Unavailable).To(BeTrue(), "its taint is still on the node")

	delete(n.Annotations, AnnotationMIGSince)
	g.Expect(p.view(context.Background(), n).Unavailable).To(BeFalse(),
		"a state label without this operator's since annotation is another's, which its forget cannot remove")

	delete(n.Labels, gpuv1.LabelMIGReconfigureState)
	g.Expect(p.view(context.Background(), n).Unavailable).To(BeFalse(), "in service once its marks are gone")
}
