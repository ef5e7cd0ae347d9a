#!/usr/bin/env bash
# Installs what the dataplane (test/dataplane;
# docs/local-cluster.md#the-dataplane) needs and this machine lacks: ip
# (iproute2), iptables and ipset, which kube-router runs. Debian packages, with apt-get, as root; Debian's iptables uses the
# nf_tables backend. Where it cannot install them (not root, no apt-get) it
# says what is missing and exits 0: the dataplane then skips with that
# same message rather than fail.
set -o errexit -o nounset -o pipefail

need=()
command -v ip >/dev/null 2>&1 || need+=(iproute2)
command -v iptables >/dev/null 2>&1 || need+=(iptables)
command -v ipset >/dev/null 2>&1 || need+=(ipset)
if [[ ${#need[@]} -eq 0 ]]; then
  exit 0
fi
if [[ $(id -u) -ne 0 ]] || ! command -v apt-get >/dev/null 2>&1; then
  echo "dataplane-deps: ${need[*]} missing and not installable here (apt-get, as root); the dataplane will skip" >&2
  exit 0
fi
echo "dataplane-deps: installing ${need[*]}" >&2
if ! { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${need[@]}"; } >&2; then
  echo "dataplane-deps: installing ${need[*]} failed; the dataplane will skip" >&2
fi
