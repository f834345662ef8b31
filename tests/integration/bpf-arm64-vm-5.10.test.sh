#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# The BPF sampler in a VM on Debian 11's arm64 cloud kernel (5.10), TCG: the floor (bpf/README.md): tests/lib/bpf-vm.sh.
exec bash "$EP_TOP/tests/lib/bpf-vm.sh" arm64 vm-5.10-arm64
