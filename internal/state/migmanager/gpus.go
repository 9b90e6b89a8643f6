package migmanager

// migGPU is one family of MIG-capable GPUs: the PCI device IDs mig-parted's
// device filters name (0x<device><vendor>), each MIG profile with as many
// instances as fit on one GPU, and the balanced layout.
//
// The profiles and counts are what NVML reports for these GPUs, as
// mig-manager v0.15.0 turns them into a configuration at its start
// (mig-parted v0.15.0, pkg/mig/builder: all-<profile> with its most
// instances, '+' written '.'; all-balanced of 2 1g, 1 2g and 1 3g on a GPU
// of 7 slices, 2 1g and 1 2g on one of 4), and as NVIDIA's operator ships
// them for mig-manager to fall back on (gpu-operator v26.7.0,
// assets/state-mig-manager/0400_configmap.yaml, whose comments group the
// profiles by GPU and whose device filters name the IDs).
type migGPU struct {
	name     string
	ids      []string
	profiles []migProfile
	balanced map[string]int
}

type migProfile struct {
	name string
	max  int
}

// migGPUs are the GPU families the default configuration covers: every
// one NVIDIA's configuration names.
var migGPUs = []migGPU{
	{name: "A100 40GB, A800 40GB", ids: []string{"0x20B010DE", "0x20B110DE", "0x20F110DE", "0x20F610DE"},
		profiles: []migProfile{{"1g.5gb", 7}, {"1g.5gb+me", 1}, {"1g.10gb", 4}, {"2g.10gb", 3}, {"3g.20gb", 2}, {"4g.20gb", 1}, {"7g.40gb", 1}},
		balanced: map[string]int{"1g.5gb": 2, "2g.10gb": 1, "3g.20gb": 1}},
	{name: "A100 80GB, A800 80GB, H100 80GB, H800 80GB",
		ids: []string{"0x233010DE", "0x233110DE", "0x232210DE", "0x20B210DE", "0x20B510DE", "0x20F310DE", "0x20F510DE", "0x232410DE"},
		profiles: []migProfile{{"1g.10gb", 7}, {"1g.10gb+me", 1}, {"1g.20gb", 4}, {"2g.20gb", 3}, {"3g.40gb", 2}, {"4g.40gb", 1},
			{"7g.80gb", 1}},
		balanced: map[string]int{"1g.10gb": 2, "2g.20gb": 1, "3g.40gb": 1}},
	// mig-parted v0.15.0 writes the A30's profiles out itself: NVML
	// misreports them.
	{name: "A30", ids: []string{"0x20B710DE"},
		profiles: []migProfile{{"1g.6gb", 4}, {"1g.6gb+me", 1}, {"2g.12gb", 2}, {"2g.12gb+me", 1}, {"4g.24gb", 1}},
		balanced: map[string]int{"1g.6gb": 2, "2g.12gb": 1}},
	{name: "H100 NVL, H800 NVL", ids: []string{"0x232110DE", "0x233A10DE"},
		profiles: []migProfile{{"1g.12gb", 7}, {"1g.12gb+me", 1}, {"1g.24gb", 4}, {"2g.24gb", 3}, {"3g.47gb", 2}, {"4g.47gb", 1},
			{"7g.94gb", 1}},
		balanced: map[string]int{"1g.12gb": 2, "2g.24gb": 1, "3g.47gb": 1}},
	{name: "H100 96GB, GH200 96GB, H20, PG506", ids: []string{"0x234210DE", "0x233D10DE", "0x20B610DE", "0x232910DE"},
		profiles: []migProfile{{"1g.12gb", 7}, {"1g.12gb+me", 1}, {"1g.24gb", 4}, {"2g.24gb", 3}, {"3g.48gb", 2}, {"4g.48gb", 1},
			{"7g.96gb", 1}},
		balanced: map[string]int{"1g.12gb": 2, "2g.24gb": 1, "3g.48gb": 1}},
	{name: "H200, H200 NVL", ids: []string{"0x233510DE", "0x233B10DE"},
		profiles: []migProfile{{"1g.18gb", 7}, {"1g.18gb+me", 1}, {"1g.35gb", 4}, {"2g.35gb", 3}, {"3g.71gb", 2}, {"4g.71gb", 1},
			{"7g.141gb", 1}},
		balanced: map[string]int{"1g.18gb": 2, "2g.35gb": 1, "3g.71gb": 1}},
	{name: "GH200 144GB HBM3e", ids: []string{"0x234810DE"},
		profiles: []migProfile{{"1g.18gb", 7}, {"1g.18gb+me", 1}, {"1g.36gb", 4}, {"2g.36gb", 3}, {"3g.72gb", 2}, {"4g.72gb", 1},
			{"7g.144gb", 1}},
		balanced: map[string]int{"1g.18gb": 2, "2g.36gb": 1, "3g.72gb": 1}},
	{name: "B200", ids: []string{"0x290110DE"},
		profiles: []migProfile{{"1g.23gb", 7}, {"1g.23gb+me", 1}, {"1g.45gb", 4}, {"2g.45gb", 3}, {"3g.90gb", 2}, {"4g.90gb", 1},
			{"7g.180gb", 1}},
		balanced: map[string]int{"1g.23gb": 2, "2g.45gb": 1, "3g.90gb": 1}},
	{name: "GB200", ids: []string{"0x294110DE"},
		profiles: []migProfile{{"1g.23gb", 7}, {"1g.23gb+me", 1}, {"1g.47gb", 4}, {"2g.47gb", 3}, {"3g.93gb", 2}, {"4g.93gb", 1},
			{"7g.186gb", 1}},
		balanced: map[string]int{"1g.23gb": 2, "2g.47gb": 1, "3g.93gb": 1}},
	// Its +me.all (every media engine, so one instance per GPU) and -me
	// (none) profiles need mig-parted v0.13.0 or later, which the
	// mig-manager shipped (v0.15.0) is: an older one refuses a whole file
	// that names them.
	{name: "RTX PRO 6000 Blackwell Server Edition", ids: []string{"0x2BB510DE"},
		profiles: []migProfile{{"1g.24gb", 4}, {"1g.24gb+gfx", 4}, {"1g.24gb+me.all", 1}, {"1g.24gb-me", 4},
			{"2g.48gb", 2}, {"2g.48gb+gfx", 2}, {"2g.48gb+me.all", 1}, {"2g.48gb-me", 2}, {"4g.96gb", 1}, {"4g.96gb+gfx", 1}},
		balanced: map[string]int{"1g.24gb": 2, "2g.48gb": 1}},
	{name: "B300", ids: []string{"0x318210DE"},
		profiles: []migProfile{{"1g.34gb", 7}, {"1g.34gb+me", 1}, {"1g.67gb", 4}, {"2g.67gb", 3}, {"3g.135gb", 2}, {"4g.135gb", 1},
			{"7g.269gb", 1}},
		balanced: map[string]int{"1g.34gb": 2, "2g.67gb": 1, "3g.135gb": 1}},
	{name: "GB300", ids: []string{"0x31C210DE"},
		profiles: []migProfile{{"1g.35gb", 7}, {"1g.35gb+me", 1}, {"1g.70gb", 4}, {"2g.70gb", 3}, {"3g.139gb", 2}, {"4g.139gb", 1},
			{"7g.278gb", 1}},
		balanced: map[string]int{"1g.35gb": 2, "2g.70gb": 1, "3g.139gb": 1}},
	// Profiles NVIDIA's configuration lists without saying which of its
	// GPUs has them (larger-memory GH200 and Blackwell variants); they
	// stay, unfiltered, for whoever has such a GPU.
	{name: "listed by NVIDIA without a device", profiles: []migProfile{{"1g.24gb+me", 1}, {"3g.95gb", 2}, {"4g.95gb", 1}, {"7g.189gb", 1}}},
}
