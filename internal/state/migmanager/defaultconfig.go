package migmanager

// DefaultConfig is the configuration file of default-mig-parted-config:
// MIG off or on without devices on every GPU, and each profile alone (as
// many as fit) on every GPU of the H100 80GB and H200 141GB, under
// NVIDIA's names (gpu-operator v25.3.1,
// assets/state-mig-manager/0400_configmap.yaml), without the media
// extension (+me) and all-balanced variants.
// Unlike NVIDIA's, its entries carry no device filter: a configuration
// names its GPU's memory, and one applied to another GPU fails with
// mig-manager's error rather than doing nothing. Name a ConfigMap of your
// own in migManager.config.name for other GPUs or mixed layouts.
const DefaultConfig = `version: v1
mig-configs:
  all-disabled:
    - devices: all
      mig-enabled: false
  all-enabled:
    - devices: all
      mig-enabled: true
      mig-devices: {}
  all-1g.10gb:
    - devices: all
      mig-enabled: true
      mig-devices:
        "1g.10gb": 7
  all-1g.20gb:
    - devices: all
      mig-enabled: true
      mig-devices:
        "1g.20gb": 4
  all-2g.20gb:
    - devices: all
      mig-enabled: true
      mig-devices:
        "2g.20gb": 3
  all-3g.40gb:
    - devices: all
      mig-enabled: true
      mig-devices:
        "3g.40gb": 2
  all-4g.40gb:
    - devices: all
      mig-enabled: true
      mig-devices:
        "4g.40gb": 1
  all-7g.80gb:
    - devices: all
      mig-enabled: true
      mig-devices:
        "7g.80gb": 1
  all-1g.18gb:
    - devices: all
      mig-enabled: true
      mig-devices:
        "1g.18gb": 7
  all-1g.35gb:
    - devices: all
      mig-enabled: true
      mig-devices:
        "1g.35gb": 4
  all-2g.35gb:
    - devices: all
      mig-enabled: true
      mig-devices:
        "2g.35gb": 3
  all-3g.71gb:
    - devices: all
      mig-enabled: true
      mig-devices:
        "3g.71gb": 2
  all-4g.71gb:
    - devices: all
      mig-enabled: true
      mig-devices:
        "4g.71gb": 1
  all-7g.141gb:
    - devices: all
      mig-enabled: true
      mig-devices:
        "7g.141gb": 1
`

// GPUClientsKey is the key of the GPU clients file mig-manager reads
// (GPU_CLIENTS_FILE).
const GPUClientsKey = "clients.yaml"

// DefaultGPUClients is the file of default-gpu-clients: the host's
// services that hold the GPUs and that mig-manager stops while it applies
// a configuration on a node with the host's driver, as NVIDIA's lists them
// (gpu-operator v25.3.1, assets/state-mig-manager/0410_configmap.yaml).
const DefaultGPUClients = `version: v1
systemd-services:
  - nvsm.service
  - nvsm-mqtt.service
  - nvsm-core.service
  - nvsm-api-gateway.service
  - nvsm-notifier.service
  - nv_peer_mem.service
  - nvidia-dcgm.service
  - dcgm.service
  - dcgm-exporter.service
`
