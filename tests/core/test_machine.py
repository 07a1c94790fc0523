"""`core.machine`: the name every measured cache is keyed by tells apart two CPUs behind one host name."""
from __future__ import annotations

import platform
from pathlib import Path

import torch

from spectree.core import machine


def test_the_cpu_model_comes_from_cpuinfo_else_platform(monkeypatch):
    cpu = machine.cpu_model()
    assert cpu and "\n" not in cpu
    if Path("/proc/cpuinfo").exists() and "model name" in Path("/proc/cpuinfo").read_text():
        assert cpu in Path("/proc/cpuinfo").read_text()
    monkeypatch.setattr(machine, "Path", lambda *a: Path("/nonexistent/cpuinfo"))
    monkeypatch.setattr(platform, "processor", lambda: "Fallback CPU")
    assert machine.cpu_model() == "Fallback CPU"


def test_two_cpus_behind_one_host_name_get_two_machine_ids(monkeypatch):
    """Two VMs both called `vm` (the Intel AVX-512 and the AMD AVX2 hosts this project ran on) shared one cost model
    and one kernel crossover cache while the id was host-arch-threads; the CPU model and ISA now part them."""
    monkeypatch.setattr(platform, "node", lambda: "vm")
    ids = {}
    for cpu, isa in [("Intel(R) Xeon(R) Processor", "AVX512"), ("AMD EPYC", "AVX2"), ("AMD EPYC", "AVX512")]:
        monkeypatch.setattr(machine, "cpu_model", lambda cpu=cpu: cpu)
        monkeypatch.setattr(machine, "cpu_isa", lambda isa=isa: isa)
        ids[cpu, isa] = machine.machine_id()
    assert len(set(ids.values())) == 3
    intel = ids["Intel(R) Xeon(R) Processor", "AVX512"]
    threads = "cpu" if not torch.cuda.is_available() else ""
    assert intel.startswith("vm-") and "-Intel_Xeon_Processor-AVX512-" in intel and threads in intel
    assert all("/" not in i and " " not in i for i in ids.values())


def test_the_thread_count_is_the_last_field(monkeypatch):
    """`costmodel.cached_cost_model` finds this host's caches of other thread counts by the id before its last
    '-': no other field may hold one."""
    monkeypatch.setattr(platform, "node", lambda: "my-host")
    monkeypatch.setattr(machine, "cpu_model", lambda: "Some-CPU @ 2.0GHz")
    before = torch.get_num_threads()
    try:
        torch.set_num_threads(1)
        one = machine.machine_id()
        torch.set_num_threads(2)
        two = machine.machine_id()
    finally:
        torch.set_num_threads(before)
    if not torch.cuda.is_available():
        assert one.rsplit("-", 1) == [two.rsplit("-", 1)[0], "cpu1"] and two.endswith("-cpu2")
    assert one.count("-") == 4
