"""The weight cache's default budget comes from the memory the machine has free: /proc/meminfo's
MemAvailable read from its text, half of what the detail budget and 1 GiB leave, in steps of
256 MiB, at least 256 MiB, and the fixed 768 MiB when the free memory cannot be told."""
from transformer_stepper.io import free_memory
from transformer_stepper.io.free_memory import FreeMemory, available_memory, default_weight_budget

MiB, GiB = 1 << 20, 1 << 30
MEMINFO = """MemTotal:       24684236 kB
MemFree:        20606088 kB
MemAvailable:   {} kB
Buffers:          283712 kB
"""


def write_meminfo(tmp_path, kib):
    path = tmp_path / "meminfo"
    path.write_text(MEMINFO.format(kib) if kib is not None else "MemTotal: 24684236 kB\nMemFree: 1 kB\n")
    return str(path)


def test_meminfo_available_is_read_in_bytes(tmp_path):
    free = available_memory(write_meminfo(tmp_path, 24069664))
    assert free == FreeMemory(24069664 * 1024, "MemAvailable")


def test_small_machine_gets_the_floor(tmp_path):
    free = available_memory(write_meminfo(tmp_path, 1536 * 1024))       # 1.5 GiB free
    assert default_weight_budget(free, 1 * GiB) == 256 * MiB             # less than the reserve


def test_medium_machine_gets_half_of_what_is_left_in_256_mib_steps(tmp_path):
    free = available_memory(write_meminfo(tmp_path, 12 * 1024 * 1024))    # 12 GiB
    assert default_weight_budget(free, 1 * GiB) == 5 * GiB              # (12 - 1 - 1) / 2
    free = available_memory(write_meminfo(tmp_path, 5000 * 1024))        # 5,000 MiB
    assert default_weight_budget(free, 1 * GiB) == 1280 * MiB           # 1,476 MiB rounded down
    assert default_weight_budget(free, 0) == 1792 * MiB                 # no detail budget: 1,964 -> 1,792


def test_huge_machine(tmp_path):
    free = available_memory(write_meminfo(tmp_path, 512 * 1024 * 1024))   # 512 GiB
    assert default_weight_budget(free, 1 * GiB) == 255 * GiB


def test_unknown_free_memory_keeps_the_fixed_default(tmp_path, monkeypatch):
    monkeypatch.setattr(free_memory.os, "sysconf_names", {})             # as on macOS
    monkeypatch.setattr(free_memory.sys, "platform", "darwin")
    assert available_memory(write_meminfo(tmp_path, None)) is None       # no MemAvailable line
    assert available_memory(str(tmp_path / "absent")) is None
    assert default_weight_budget(None, 1 * GiB) == 768 * MiB


def test_garbled_meminfo_falls_back_to_sysconf(tmp_path, monkeypatch):
    path = tmp_path / "meminfo"
    path.write_text("MemAvailable: lots kB\n")
    monkeypatch.setattr(free_memory.os, "sysconf_names", {"SC_AVPHYS_PAGES": 86, "SC_PAGE_SIZE": 30})
    monkeypatch.setattr(free_memory.os, "sysconf", lambda name: {"SC_AVPHYS_PAGES": 1000,
                                                                 "SC_PAGE_SIZE": 4096}[name])
    assert available_memory(str(path)) == FreeMemory(4096 * 1000, "SC_AVPHYS_PAGES")


def test_status_bar_count_never_waits_for_a_worker_holding_the_store():
    """The weight-budget label counts the widened weights on the GUI thread: while a worker
    holds the store (widening a tensor, seconds on a 1B model) it gets the last count at once."""
    import threading
    import time
    from pathlib import Path

    from transformer_stepper import load_model

    fixture = Path(__file__).resolve().parents[1] / "fixtures" / "gguf" / "llama_k.Q4_K_M.gguf"
    params = load_model(fixture).params
    params[next(iter(params))]                               # one tensor dequantized
    counted = params.nbytes_widened()
    assert counted > 0
    held, release = threading.Event(), threading.Event()

    def worker():
        with params._lock:
            held.set()
            release.wait(10)
    thread = threading.Thread(target=worker)
    thread.start()
    held.wait(10)
    start = time.perf_counter()
    assert params.nbytes_widened(wait=False) == counted
    assert time.perf_counter() - start < 0.5
    release.set()
    thread.join()
