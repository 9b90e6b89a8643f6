#!/usr/bin/env bash
# Runs the host-side pieces of the operand pods (written by
# `go run ./hack/hostcheck -out DIR`) on this machine, for real, outside
# Kubernetes: as root, on a host with an NVIDIA GPU and driver. Each piece
# runs where its pod would see it; nothing of the host is changed but
# scratch directories, removed at the end.
#
#  1. the driver pod's host-driver check, against this host's / (at /host)
#     and against an empty root;
#  2. the driver container's startup probe (nvidia-smi);
#  3. the toolkit's readiness probe, before and after the toolkit's own
#     config writer (nvidia-ctk runtime configure, at the version the
#     operator ships) configured a scratch containerd config and CRI-O hook,
#     and for a config older than the toolkit's start;
#  4. the device plugin's /dev/char step, into a scratch directory, for a
#     host driver and for a driver container; each link is resolved;
#  5. with CDI, the toolkit pod's management spec writer, with this host's
#     driver and nvidia-ctk, into a scratch spec, its readiness probe
#     before and after, and the device plugin's wait for the spec (the
#     modules are not loaded nor control nodes made here: that changes
#     the host).
#  6. the workload proof's command (NVIDIA's CUDA sample, vectorAdd, from
#     VECTORADD or PATH) on one GPU, its run read by the operator's own
#     verdict (DIR/hostcheck -verdict), and on NVSwitch systems Fabric
#     Manager's state from nvidia-smi, which must agree with the sample.
#
# Each step states the exit status it wants; the script exits 1 when any
# step exits otherwise, and 3 when none did but the CUDA sample was not
# found to run.
#
# Usage: hack/host-check.sh DIR   (NVIDIA_CTK: the nvidia-ctk binary to use;
# VECTORADD: the CUDA sample)
set -uo pipefail
dir=$(cd "$1" && pwd)
ctk=${NVIDIA_CTK:-$(command -v nvidia-ctk)}
scratch=$(mktemp -d)
created=()
# The host check writes its verdict where a container's termination message
# goes; on a host that path must be free for the run.
[[ -e /dev/termination-log ]] && { echo "/dev/termination-log exists: not touching it" >&2; exit 1; }
cleanup() {
  for p in "${created[@]}"; do umount "$p" 2>/dev/null; rm -rf "$p"; done
  rm -rf "$scratch" /dev/termination-log
}
trap cleanup EXIT
section() { printf '\n=== %s\n' "$*"; }
# run NAME CMD...: runs a command, prints its output and exit status.
run() {
  local name=$1
  shift
  "$@" >"$scratch/out" 2>&1
  local rc=$?
  sed 's/^/    /' "$scratch/out"
  echo "  -> $name: exit $rc"
  return $rc
}
fail=0
# expect WANT NAME CMD...: runs a command as run does, and notes a failure
# when it does not exit WANT; WANT "failure" is any non-zero status (a
# probe fails on any: grep exits 2 for a file not written yet).
expect() {
  local want=$1 name=$2 rc
  shift
  run "$@"
  rc=$?
  if [[ $want == failure && $rc != 0 ]] || [[ $rc == "$want" ]]; then
    :
  else
    echo "  !! $name: exit $rc, want $want"
    fail=1
  fi
}
# scratch_mount PATH: makes PATH, which must not exist, for the run.
scratch_mount() {
  [[ -e $1 ]] && { echo "$1 exists: not touching it" >&2; exit 1; }
  mkdir -p "$1" && created+=("$1")
}

section "host: $(uname -r), $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>&1 | head -n1)"
echo "  nvidia-smi: $(command -v nvidia-smi); /usr/bin/nvidia-smi: $([[ -e /usr/bin/nvidia-smi ]] && echo present || echo absent)"
echo "  nvidia-ctk: $ctk ($("$ctk" --version 2>&1 | head -n1))"

section "1. host-driver check (driver pod's init container)"
scratch_mount /host
# The kubelet mounts a hostPath recursively: /proc, /dev and every other
# mount of the host are there too.
mount --rbind / /host && mount --make-rslave /host
expect 42 "this host at /host, whose driver answers" sh "$dir/host-driver-check.sh"
echo "  termination message: $(cat /dev/termination-log 2>/dev/null)"
umount -R /host
rm -f /dev/termination-log
expect 0 "an empty host root at /host" sh "$dir/host-driver-check.sh"

section "2. driver startup probe"
expect 0 "nvidia-smi" sh "$dir/driver-startup-probe.sh" >"$scratch/smi"
head -n 12 "$scratch/smi"
grep -E '^  (->|!!)' "$scratch/smi"

section "3. toolkit readiness probe, around the toolkit's config writer"
export RUNTIME=containerd ROOT=/usr/local/nvidia RUNTIME_CONFIG=$scratch/containerd/config.toml TOOLKIT_PID_FILE=$scratch/toolkit.pid
mkdir -p "$scratch/containerd"
touch "$TOOLKIT_PID_FILE" && sleep 1
expect failure "before the toolkit configured containerd" sh "$dir/toolkit-ready.sh"
expect 0 "nvidia-ctk runtime configure --runtime=containerd" "$ctk" runtime configure --runtime=containerd \
  --config="$RUNTIME_CONFIG" --config-source=file --nvidia-runtime-name=nvidia \
  --nvidia-runtime-path=/usr/local/nvidia/toolkit/nvidia-container-runtime --nvidia-set-as-default
grep -n 'nvidia' "$RUNTIME_CONFIG" | sed 's/^/    config.toml:/' | head -n 8
expect 0 "after" sh "$dir/toolkit-ready.sh"
sleep 1 && touch "$TOOLKIT_PID_FILE"
expect failure "a config older than the toolkit's start" sh "$dir/toolkit-ready.sh"
export RUNTIME=crio CRIO_HOOKS_DIR=$scratch/hooks.d
mkdir -p "$CRIO_HOOKS_DIR" && touch "$TOOLKIT_PID_FILE" && sleep 1
expect failure "CRI-O, before the hook" sh "$dir/toolkit-ready.sh"
expect 0 "nvidia-ctk runtime configure --runtime=crio --config-mode=oci-hook" "$ctk" runtime configure --runtime=crio \
  --config-mode=oci-hook --oci-hook-path="$CRIO_HOOKS_DIR/oci-nvidia-hook.json" \
  --nvidia-runtime-hook-path=/usr/local/nvidia/toolkit/nvidia-container-runtime-hook
expect 0 "CRI-O, after" sh "$dir/toolkit-ready.sh"
unset RUNTIME ROOT RUNTIME_CONFIG TOOLKIT_PID_FILE CRIO_HOOKS_DIR

section "4. /dev/char links (device plugin's init container)"
scratch_mount /host-dev-char
mkdir -p "$scratch/bin" && ln -s "$ctk" "$scratch/bin/nvidia-ctk"
for root in "" /run/nvidia/driver; do
  rm -f /host-dev-char/*
  PATH=$scratch/bin:$PATH DEV_ROOT=$root expect 0 "DEV_ROOT='$root'" sh "$dir/dev-char-links.sh" >"$scratch/devchar"
  tail -n 3 "$scratch/devchar"
  total=0 good=0
  for link in /host-dev-char/*; do
    [[ -L $link ]] || continue
    total=$((total + 1))
    want=${link##*/}
    if got=$(stat -L -c '%t %T' "$link" 2>/dev/null); then
      read -r maj min <<<"$got"
      [[ $((16#$maj)):$((16#$min)) == "$want" && -c $link ]] && good=$((good + 1))
    fi
    [[ -c $link ]] && echo "    $want -> $(readlink "$link") (char device)"
  done
  echo "  -> $total links, $good resolve to a char device of their major:minor (the others await nodes the driver has not made)"
done

section "5. CDI management spec (toolkit's cdi-spec-writer, plugin's wait-for-cdi-spec)"
mkdir -p "$scratch/install/toolkit" "$scratch/cdi"
ln -s "$ctk" "$scratch/install/toolkit/nvidia-ctk"
ln -s "$(command -v nvidia-cdi-hook || echo /usr/bin/nvidia-cdi-hook)" "$scratch/install/toolkit/nvidia-cdi-hook"
export ROOT=$scratch/install SPEC=$scratch/cdi/management.nvidia.com-gpu.yaml DRIVER_VERSION_FILE=/sys/module/nvidia/version \
  DRIVER_ROOT_CTR_PATH=/ NVIDIA_DRIVER_ROOT=/ DEV_ROOT_CTR_PATH=/ NVIDIA_DEV_ROOT=/ HOST_DRIVER_ROOT=
expect failure "ready before the spec" sh "$dir/cdi-spec-ready.sh"
timeout 120 sh "$dir/cdi-spec-writer.sh" >"$scratch/writer" 2>&1 &
writer=$!
for _ in $(seq 60); do sh "$dir/cdi-spec-ready.sh" && break; sleep 1; done
kill "$writer" 2>/dev/null
sed 's/^/    /' "$scratch/writer" | head -n 20
expect 0 "ready once written" sh "$dir/cdi-spec-ready.sh"
grep -c "\.so\.$(cat /sys/module/nvidia/version)\$" "$SPEC" | sed 's/^/    mounts of the loaded driver'"'"'s libraries: /'
expect 0 "the plugin's wait passes" timeout 10 sh "$dir/wait-for-cdi-spec.sh"
unset ROOT SPEC DRIVER_VERSION_FILE DRIVER_ROOT_CTR_PATH NVIDIA_DRIVER_ROOT DEV_ROOT_CTR_PATH NVIDIA_DEV_ROOT HOST_DRIVER_ROOT

section "6. CUDA workload (the workload proof's pod), and Fabric Manager"
# The pod runs the validator image's vectorAdd (/usr/bin/vectorAdd in
# nvcr.io/nvidia/gpu-operator:v26.7.0) on the one GPU the plugin gave it.
sample=${VECTORADD:-$(command -v vectorAdd)}
skipped=0
if [[ -z $sample || ! -x $sample ]]; then
  echo "  !! skipped: no vectorAdd; set VECTORADD to the validator image's /usr/bin/vectorAdd" \
    "(for example: ctr image pull, then ctr image mount, or docker create and docker cp)"
  skipped=1
else
  echo "  sample: $sample"
  PATH=$(dirname "$sample"):$PATH CUDA_VISIBLE_DEVICES=0 sh "$dir/cuda-workload.sh" >"$scratch/sample" 2>&1
  rc=$?
  sed 's/^/    /' "$scratch/sample" | tail -n 6
  echo "  -> the sample on GPU 0: exit $rc"
  expect 0 "the operator's verdict on that run" "$dir/hostcheck" -verdict -exit "$rc" <"$scratch/sample"
fi
# The proof reads Fabric Manager's state through CUDA's error (802 while
# the NVLink fabric is not trained); nvidia-smi says it directly on
# NVSwitch systems, where the two must agree.
if compgen -G "/dev/nvidia-nvswitch*" >/dev/null; then
  nvidia-smi -q | grep -A 3 -E '^ *Fabric *$' | sed 's/^/    /' | head -n 8
  command -v systemctl >/dev/null && echo "    nvidia-fabricmanager: $(systemctl is-active nvidia-fabricmanager 2>&1)"
  if nvidia-smi -q | grep -A 2 -E '^ *Fabric *$' | grep -q -E 'State *: *(Not Started|In Progress)'; then
    echo "  Fabric Manager has not trained the fabric: the sample must fail with CUDA error 802"
    [[ $skipped == 0 ]] && ! grep -q "system not yet initialized" "$scratch/sample" && { echo "  !! the sample did not fail with 802"; fail=1; }
  fi
else
  echo "  no NVSwitch (/dev/nvidia-nvswitch*): no Fabric Manager to query"
fi

section "result"
if [[ $fail == 0 ]]; then echo "  every step run exited as expected"; else echo "  some steps did not exit as expected (!! above)"; fi
if [[ $skipped == 1 ]]; then
  echo "  the CUDA workload was not run (no vectorAdd): this run proves nothing of it"
  [[ $fail == 0 ]] && exit 3
fi
exit $fail
