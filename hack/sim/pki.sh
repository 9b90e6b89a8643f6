#!/usr/bin/env bash
# Makes the simulated cluster's PKI with openssl: a CA, the API server's
# serving certificate, an admin client certificate (system:masters), a
# serving certificate for kwok, and the service-account key pair.
# Usage: pki.sh DIR
set -euo pipefail
dir=$1
mkdir -p "$dir"
cd "$dir"
[[ -f ca.crt ]] && exit 0

openssl genrsa -out ca.key 2048 2>/dev/null
openssl req -x509 -new -key ca.key -days 3650 -subj "/CN=gpu-operator-sim-ca" -out ca.crt

# sign NAME SUBJECT [SANS]: a key and a certificate signed by the CA.
sign() {
  local name=$1 subject=$2 sans=${3:-}
  openssl genrsa -out "$name.key" 2048 2>/dev/null
  openssl req -new -key "$name.key" -subj "$subject" -out "$name.csr"
  local ext=$name.ext
  {
    echo "basicConstraints=CA:FALSE"
    echo "keyUsage=digitalSignature,keyEncipherment"
    if [[ -n $sans ]]; then
      echo "extendedKeyUsage=serverAuth,clientAuth"
      echo "subjectAltName=$sans"
    else
      echo "extendedKeyUsage=clientAuth"
    fi
  } >"$ext"
  openssl x509 -req -in "$name.csr" -CA ca.crt -CAkey ca.key -CAcreateserial -days 3650 -extfile "$ext" -out "$name.crt" 2>/dev/null
  rm -f "$name.csr" "$ext"
}

sign apiserver "/CN=kube-apiserver" \
  "IP:127.0.0.1,IP:10.0.0.1,DNS:localhost,DNS:kubernetes,DNS:kubernetes.default,DNS:kubernetes.default.svc,DNS:kubernetes.default.svc.cluster.local"
sign admin "/O=system:masters/CN=admin"
sign kwok "/CN=kwok" "IP:127.0.0.1,DNS:localhost"
openssl genrsa -out sa.key 2048 2>/dev/null
openssl rsa -in sa.key -pubout -out sa.pub 2>/dev/null
