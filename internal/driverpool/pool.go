package driverpool

import (
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/component-helpers/scheduling/corev1/nodeaffinity"

	gpuv1 "github.com/gpu-operator/gpu-operator/api/v1"
	gpuv1alpha1 "github.com/gpu-operator/gpu-operator/api/v1alpha1"
)

// Pool is one driver pool: the settings its nodes' driver runs with.
type Pool struct {
	// Name is the value of the node label nvidia.com/gpu.driver-pool and
	// part of the pool's DaemonSet names.
	Name string
	// Driver is the pool's driver settings: the policy's driver section
	// with the pool's version, or an NVIDIADriver's, in the same shape, so
	// that one renderer and one upgrade serve both.
	Driver gpuv1.DriverSpec
	// Daemonsets are the pod settings shared with the other operands, with
	// an NVIDIADriver's labels, annotations, tolerations and priority class
	// over the policy's.
	Daemonsets gpuv1.DaemonsetsSpec
	// DevicePluginConfig and MIGConfig are a ClusterPolicy pool's choices
	// for its nodes; NVIDIADrivers have none.
	DevicePluginConfig, MIGConfig string
	// Precompiled runs NVIDIA's precompiled driver images, one per kernel.
	Precompiled bool
	// Runs is false for a driver the operator does not run (vGPU): its
	// nodes get no driver DaemonSet, and a node that has a driver keeps
	// it.
	Runs bool
	// OwnUpgradePolicy is true for an NVIDIADriver with an upgradePolicy:
	// its nodes upgrade within a budget of their own, not the policy's.
	OwnUpgradePolicy bool
	// GDS and GDRCopy are the pool's GPUDirect Storage and GDRCopy
	// modules: the policy's, or an NVIDIADriver's own.
	GDS     *gpuv1.GPUDirectStorageSpec
	GDRCopy *gpuv1.GDRCopySpec
	// Mode is how the pool's nodes serve their GPUs: the pool's own
	// allocationMode, else the policy's driver.allocationMode, else the
	// device plugin. It is kept out of Driver so that a pool changing
	// mode changes nothing of its driver's DaemonSets.
	Mode gpuv1.AllocationMode

	isDefault bool
	selects   func(name string, labels map[string]string) bool
	// selection is what selects was made from, for Equal: a function
	// compares equal to none.
	selection any
}

// Set is every driver pool of the cluster under one policy.
type Set struct {
	// Pools in a stable order: a policy's as declared, then its default
	// pool; NVIDIADrivers by name.
	Pools []Pool
	// FromNVIDIADrivers is true under driver.useNvidiaDriverCRD.
	FromNVIDIADrivers bool
	// Images are the verdicts of the precompiled images' checks, by
	// image; an image not there is not checked yet.
	Images map[string]ImageVerdict
	// GPUCluster names the GPUCluster that lies over the pools, if any:
	// every pool is then in allocation mode dra.
	GPUCluster string

	draDriver *gpuv1.DRADriverSpec
}

// Assignment is the pool a GPU node runs its driver from.
type Assignment struct {
	// Pool names the node's pool.
	Pool string
	// Conflicts names the NVIDIADrivers that all select the node, when
	// more than one does; Unclaimed is true when none does. Either way
	// the node keeps the pool it runs (Pool is its label, empty for none)
	// and nothing replaces or removes its driver until that changes: a
	// driver is taken off a node by its nvidia.com/gpu.deploy.driver=false
	// label, never by a selector that stopped matching.
	Conflicts []string
	Unclaimed bool
	// NotRun is true when the node's pool is one whose driver the
	// operator does not run (vGPU): the node keeps the driver it has, if
	// any.
	NotRun bool
	// Kernel and Image are, in a precompiled pool, the kernel the node
	// boots (NFD's label) and the image built for it; empty otherwise.
	Kernel, Image string
	// AwaitsImage says, in a precompiled pool, why the node's driver for
	// its kernel cannot start yet: the kernel unknown, or its image being
	// checked or missing (ImageMissing). Until it can, the node keeps the
	// driver it runs.
	AwaitsImage  string
	ImageMissing bool
	// Mode is the allocation mode of the node's pool; empty when the node
	// is held by no pool (Conflicts, Unclaimed), and then it keeps the
	// mode it has.
	Mode gpuv1.AllocationMode
}

// IsDefault reports whether the pool takes the GPU nodes no other selects.
func (p *Pool) IsDefault() bool { return p.isDefault }

// Held reports whether the node's driver stays where it is, unmanaged.
func (a Assignment) Held() bool {
	return len(a.Conflicts) > 0 || a.Unclaimed || a.NotRun || a.AwaitsImage != ""
}

// FromPolicy returns the pools of the policy's driver.nodePools and its
// default pool.
func FromPolicy(cp *gpuv1.ClusterPolicy) *Set {
	spec := &cp.Spec.Driver
	precompiled := spec.IsPrecompiled()
	base := *spec
	base.NodePools = nil
	base.AllocationMode = ""
	mode := modeOr(spec.AllocationMode, gpuv1.AllocationDevicePlugin)
	if precompiled {
		// A precompiled image installs nothing from a repository.
		base.RepoConfig, base.CertConfig = nil, nil
	}
	s := &Set{}
	for _, p := range spec.NodePools {
		driver := base
		if p.Version != "" {
			driver.Version = p.Version
		}
		selector := p.NodeSelector
		s.Pools = append(s.Pools, Pool{Name: p.Name, Driver: driver, Daemonsets: cp.Spec.Daemonsets, Runs: true,
			Precompiled: precompiled, DevicePluginConfig: p.DevicePluginConfig, MIGConfig: p.MIGConfig,
			GDS: cp.Spec.GDS, GDRCopy: cp.Spec.GDRCopy, Mode: modeOr(p.AllocationMode, mode),
			selects: func(_ string, labels map[string]string) bool { return matches(selector, labels) }, selection: selector})
	}
	s.Pools = append(s.Pools, Pool{Name: gpuv1.DefaultDriverPool, Driver: base, Daemonsets: cp.Spec.Daemonsets,
		Runs: true, Precompiled: precompiled, GDS: cp.Spec.GDS, GDRCopy: cp.Spec.GDRCopy, Mode: mode, isDefault: true})
	return s
}

// modeOr is mode, or otherwise when mode is empty (a field left unset).
func modeOr(mode, otherwise gpuv1.AllocationMode) gpuv1.AllocationMode {
	if mode == "" {
		return otherwise
	}
	return mode
}

// UsesDRA reports whether some pool serves its nodes' GPUs through DRA:
// the DRA driver's cluster-wide objects are then deployed.
func (s *Set) UsesDRA() bool {
	if s == nil {
		return false
	}
	for i := range s.Pools {
		if s.Pools[i].Mode == gpuv1.AllocationDRA {
			return true
		}
	}
	return false
}

// AnyPrecompiled reports whether some pool runs NVIDIA's precompiled
// driver images: only then is there an image to check.
func (s *Set) AnyPrecompiled() bool {
	return s != nil && slices.ContainsFunc(s.Pools, func(p Pool) bool { return p.Precompiled })
}

// Overlay lays NVIDIA's GPUCluster over the pools: while it exists, and is
// not being deleted, every pool serves its GPUs through DRA, and the DRA
// driver runs with its settings. A pool's own mode returns when it goes;
// the nodes move back and forth through the allocation mode switch, within
// their pools' budgets, as for any change of a pool's mode.
func (s *Set) Overlay(gc *gpuv1alpha1.GPUCluster) {
	if gc == nil || gc.DeletionTimestamp != nil {
		return
	}
	for i := range s.Pools {
		s.Pools[i].Mode = gpuv1.AllocationDRA
	}
	s.GPUCluster, s.draDriver = gc.Name, &gc.Spec.DRADriver
}

// DRADriver returns the GPUCluster's DRA driver settings, or nil when no
// GPUCluster lies over the pools: the policy's then apply.
func (s *Set) DRADriver() *gpuv1.DRADriverSpec {
	if s == nil {
		return nil
	}
	return s.draDriver
}

// DRADriverFor returns the DRA driver settings in force: the
// GPUCluster's, else the policy's.
func (s *Set) DRADriverFor(cp *gpuv1.ClusterPolicy) *gpuv1.DRADriverSpec {
	if d := s.DRADriver(); d != nil {
		return d
	}
	return &cp.Spec.DRADriver
}

// Resolve returns the pools the policy runs: its own, or under
// driver.useNvidiaDriverCRD one per NVIDIADriver not being deleted.
func Resolve(cp *gpuv1.ClusterPolicy, drivers []gpuv1alpha1.NVIDIADriver) *Set {
	if !cp.Spec.Driver.UsesNVIDIADrivers() {
		return FromPolicy(cp)
	}
	s := &Set{FromNVIDIADrivers: true}
	for i := range drivers {
		if drivers[i].DeletionTimestamp != nil {
			continue
		}
		s.Pools = append(s.Pools, fromNVIDIADriver(cp, &drivers[i]))
	}
	slices.SortFunc(s.Pools, func(a, b Pool) int { return strings.Compare(a.Name, b.Name) })
	return s
}

func fromNVIDIADriver(cp *gpuv1.ClusterPolicy, nvd *gpuv1alpha1.NVIDIADriver) Pool {
	spec := &nvd.Spec
	driver := gpuv1.DriverSpec{
		ComponentSpec: gpuv1.ComponentSpec{Enabled: cp.Spec.Driver.Enabled, ContainerSettings: gpuv1.ContainerSettings{
			ImagePullPolicy: spec.ImagePullPolicy, ImagePullSecrets: spec.ImagePullSecrets,
			Env: spec.Env, Args: spec.Args, Resources: spec.Resources, HostNetwork: spec.HostNetwork,
		}},
		Repository:       spec.Repository,
		Image:            spec.Image,
		Version:          gpuv1.DriverVersion(spec.Version),
		KernelModuleType: spec.KernelModuleType,
		RDMA:             spec.GPUDirectRDMA,
		UpgradePolicy:    cp.Spec.Driver.UpgradePolicy,
		StartupProbe:     spec.StartupProbe,
		LivenessProbe:    spec.LivenessProbe,
		ReadinessProbe:   spec.ReadinessProbe,
		SecretEnv:        spec.SecretEnv,
		Manager:          spec.Manager,
	}
	if driver.Version == "" {
		driver.Version = cp.Spec.Driver.Version
		if spec.IsPrecompiled() {
			// Precompiled images are tagged by branch: the policy's.
			driver.Version = gpuv1.DriverVersion(strings.SplitN(string(driver.Version), ".", 2)[0])
		}
	}
	own := spec.UpgradePolicy != nil
	if own {
		driver.UpgradePolicy = *spec.UpgradePolicy
	}
	// A precompiled image installs nothing from a repository: NVIDIA
	// leaves its repositories and certificates out (gpu-operator v26.7.0
	// internal/state/driver_volumes.go), and so do we.
	if name := spec.RepoConfig.Named(); name != "" && !spec.IsPrecompiled() {
		driver.RepoConfig = &gpuv1.DriverRepoConfig{ConfigMapName: name}
	}
	if name := spec.CertConfig.Named(); name != "" && !spec.IsPrecompiled() {
		driver.CertConfig = &gpuv1.DriverCertConfig{Name: name}
	}
	if name := spec.KernelModuleConfig.Named(); name != "" {
		driver.KernelModuleConfig = &gpuv1.DriverKernelModuleConfig{Name: name}
	}
	ds := cp.Spec.Daemonsets
	ds.Labels = merged(ds.Labels, spec.Labels)
	ds.Annotations = merged(ds.Annotations, spec.Annotations)
	if spec.Tolerations != nil {
		ds.Tolerations = spec.Tolerations
	}
	if spec.PriorityClassName != "" {
		ds.PriorityClassName = spec.PriorityClassName
	}
	if spec.PodSecurityContext != nil {
		ds.PodSecurityContext = spec.PodSecurityContext
	}
	selector := spec.NodeSelector
	var affinity *nodeaffinity.LazyErrorNodeSelector
	var required *corev1.NodeSelector
	if a := spec.NodeAffinity; a != nil && a.RequiredDuringSchedulingIgnoredDuringExecution != nil {
		required = a.RequiredDuringSchedulingIgnoredDuringExecution
		affinity = nodeaffinity.NewLazyErrorNodeSelector(required)
	}
	return Pool{
		Name: nvd.Name, Driver: driver, Daemonsets: ds, Precompiled: spec.IsPrecompiled(), Runs: spec.Runs(),
		OwnUpgradePolicy: own, isDefault: spec.Default, GDS: spec.GPUDirectStorage, GDRCopy: spec.GDRCopy,
		Mode:      modeOr(spec.AllocationMode, modeOr(cp.Spec.Driver.AllocationMode, gpuv1.AllocationDevicePlugin)),
		selection: nvidiaDriverSelection{selector, required},
		selects: func(name string, labels map[string]string) bool {
			if !matches(selector, labels) {
				return false
			}
			if affinity == nil {
				return true
			}
			// A term that does not parse selects nothing, as the
			// scheduler's does.
			ok, err := affinity.Match(&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels}})
			return ok && err == nil
		},
	}
}

// Pool returns the named pool, or nil; nil on a nil set.
func (s *Set) Pool(name string) *Pool {
	if s == nil {
		return nil
	}
	for i := range s.Pools {
		if s.Pools[i].Name == name {
			return &s.Pools[i]
		}
	}
	return nil
}

// Assign returns the pool of a GPU node, by its name and labels: the one
// pool whose selection holds it, else the default pool. A policy's pools
// cannot overlap (the API server refuses it) and the first match wins;
// NVIDIADrivers can, and two that select the node, or none, leave it where
// its nvidia.com/gpu.driver-pool label says.
func (s *Set) Assign(name string, labels map[string]string) Assignment {
	if s == nil {
		return Assignment{Pool: labels[gpuv1.LabelDriverPool]}
	}
	var picked, defaults []string
	for i := range s.Pools {
		p := &s.Pools[i]
		switch {
		case p.isDefault:
			defaults = append(defaults, p.Name)
		case p.selects(name, labels):
			picked = append(picked, p.Name)
		}
		if !s.FromNVIDIADrivers && len(picked) == 1 {
			return s.assigned(p, labels) // a policy's pools cannot overlap
		}
	}
	if len(picked) == 0 {
		picked = defaults
	}
	switch len(picked) {
	case 0:
		return Assignment{Pool: labels[gpuv1.LabelDriverPool], Unclaimed: true}
	case 1:
		return s.assigned(s.Pool(picked[0]), labels)
	}
	return Assignment{Pool: labels[gpuv1.LabelDriverPool], Conflicts: picked}
}

// assigned is the assignment of a node to the one pool that takes it.
func (s *Set) assigned(p *Pool, labels map[string]string) Assignment {
	a := Assignment{Pool: p.Name, Mode: p.Mode}
	switch {
	case !p.Runs:
		a.NotRun = true
	case p.Precompiled:
		return s.precompiled(a, p, labels)
	}
	return a
}

func matches(selector map[string]gpuv1.LabelValue, labels map[string]string) bool {
	for k, v := range selector {
		if got, ok := labels[k]; !ok || got != string(v) {
			return false
		}
	}
	return true
}

// merged returns base with over's entries over it, as a new map when over
// has any: the policy's maps are shared and never written.
func merged[M ~map[string]V, V any](base, over M) M {
	if len(over) == 0 {
		return base
	}
	out := M{}
	for k, v := range base {
		out[k] = v
	}
	for k, v := range over {
		out[k] = v
	}
	return out
}
