#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# The BPF sampler in a VM on Debian 12's arm64 cloud kernel (6.1), TCG: tests/lib/bpf-vm.sh.
exec bash "$EP_TOP/tests/lib/bpf-vm.sh" arm64 vm-arm64
